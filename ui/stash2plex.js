// Stash2Plex inside Stash's web UI: a page at /stash2plex (navbar link) and a Plex tab on
// every scene page. Plain JavaScript on window.PluginApi (React 17, Bootstrap, Apollo,
// react-router), no build step. Reads and quick actions go through Stash's
// runPluginOperation (the plugin answers JSON: tasks/ui.py); long work through
// runPluginTask, so it shows in Stash's job queue. Listed under `ui:` in Stash2Plex.yml.
(function () {
  "use strict";

  const api = window.PluginApi;
  if (!api) return;
  const React = api.React;
  const h = React.createElement;
  const { Alert, Badge, Button, Card, Nav, ProgressBar, Spinner, Tab, Table } = api.libraries.Bootstrap;
  const { Link, NavLink, useLocation } = api.libraries.ReactRouterDOM;
  const { gql } = api.libraries.Apollo;

  const PLUGIN_ID = "Stash2Plex";
  const ROUTE = "/stash2plex"; // outside /plugin/: Stash's server owns every /plugin/ path
  // Long work runs as a task in Stash's job queue, started by its mode (validation/modes.py);
  // the label is what the job queue shows ("Running plugin task: <label>").
  const TASKS = {
    syncAll: { mode: "all", label: "Stash2Plex: Sync all" },
    verify: { mode: "reconcile", label: "Stash2Plex: Verify" },
    retryAll: { mode: "retry_dlq", label: "Stash2Plex: Retry all" },
  };
  const POLL_MS = 2000;

  const RUN_OPERATION = gql`
    mutation Stash2PlexOperation($plugin_id: ID!, $args: Map) {
      runPluginOperation(plugin_id: $plugin_id, args: $args)
    }
  `;
  const RUN_TASK = gql`
    mutation Stash2PlexTask($plugin_id: ID!, $description: String, $args_map: Map) {
      runPluginTask(plugin_id: $plugin_id, description: $description, args_map: $args_map)
    }
  `;
  // A job runPluginTask started (Stash keeps finished jobs a while: pkg/job/manager.go graveyard).
  const FIND_JOB = gql`
    query Stash2PlexJob($input: FindJobInput!) {
      findJob(input: $input) {
        id
        status
        progress
      }
    }
  `;
  const JOB_ENDED = { FINISHED: "is done", CANCELLED: "was stopped", FAILED: "failed (see Stash's log)" };
  const PLUGIN_STATE = gql`
    query Stash2PlexPluginState {
      plugins {
        id
        enabled
      }
    }
  `;

  function client() {
    return api.utils.StashService.getClient();
  }

  // One plugin run; resolves to the JSON the plugin put in `output`.
  async function operation(mode, args) {
    const result = await client().mutate({
      mutation: RUN_OPERATION,
      variables: { plugin_id: PLUGIN_ID, args: Object.assign({ mode: mode }, args || {}) },
    });
    return result.data.runPluginOperation;
  }

  // Without a menu entry named, Stash runs the plugin with these args alone (contracts/stash.md, Plugins).
  async function runTask(task) {
    const result = await client().mutate({
      mutation: RUN_TASK,
      variables: { plugin_id: PLUGIN_ID, description: task.label, args_map: { mode: task.mode } },
    });
    return result.data.runPluginTask;
  }

  function errorText(err) {
    if (!err) return "";
    if (err.graphQLErrors && err.graphQLErrors.length) return err.graphQLErrors.map((e) => e.message).join("; ");
    return err.message || String(err);
  }

  function when(iso) {
    if (!iso) return "never";
    const date = new Date(iso);
    return isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
  }

  // Is the plugin enabled? (Stash loads this file only for enabled plugins, but a user may
  // disable it in Settings → Plugins while the page stays open.)
  function usePlugin() {
    const [plugin, setPlugin] = React.useState(null);
    React.useEffect(() => {
      let live = true;
      client()
        .query({ query: PLUGIN_STATE, fetchPolicy: "network-only" })
        .then((r) => {
          const mine = (r.data.plugins || []).find((p) => p.id === PLUGIN_ID);
          if (live) setPlugin(mine || { enabled: false });
        })
        .catch(() => live && setPlugin({ enabled: false }));
      return () => {
        live = false;
      };
    }, []);
    return plugin;
  }

  function usePluginEnabled() {
    const plugin = usePlugin();
    return plugin === null ? null : !!plugin.enabled;
  }

  // Runs `load` now, again on refresh(), and every POLL_MS while `busy(data)` says so.
  function usePolled(load, busy, deps) {
    const [state, setState] = React.useState({ data: null, error: null, loading: true });
    const [tick, setTick] = React.useState(0);
    React.useEffect(() => {
      let live = true;
      let timer = null;
      load()
        .then((data) => {
          if (!live) return;
          setState({ data: data, error: null, loading: false });
          if (busy(data)) timer = setTimeout(() => live && setTick((t) => t + 1), POLL_MS);
        })
        .catch((err) => live && setState((s) => ({ data: s.data, error: errorText(err), loading: false })));
      return () => {
        live = false;
        if (timer) clearTimeout(timer);
      };
      // eslint-disable-next-line react-hooks/exhaustive-deps
    }, deps.concat([tick]));
    return [state, () => setTick((t) => t + 1)];
  }

  function Message(props) {
    return h(Alert, { variant: props.variant, className: "s2p-message" }, props.children);
  }

  function DisabledMessage() {
    return h(
      Message,
      { variant: "warning" },
      "Stash2Plex is disabled. Enable it in Settings → Plugins to see and steer the Plex sync."
    );
  }

  // -- the page ------------------------------------------------------------------------
  function PlexCard(props) {
    const plex = props.plex;
    const reach =
      plex.reachable === true
        ? h(Badge, { variant: "success", className: "s2p-state" }, "reachable")
        : plex.reachable === false
          ? h(Badge, { variant: "danger", className: "s2p-state" }, "not reachable")
          : h(Badge, { variant: "secondary", className: "s2p-state" }, "not checked");
    const token = {
      accepted: ["success", "accepted"],
      rejected: ["danger", "rejected"],
      missing: ["warning", "not set"],
      unknown: ["secondary", "unknown"],
    }[plex.token] || ["secondary", plex.token];
    return TitledCard(
      "s2p-plex",
      "Plex",
      h("div", null, reach, " since ", h("span", { className: "s2p-since" }, when(plex.since))),
      plex.version ? h("div", null, "Version ", plex.version) : null,
      h("div", null, "Token ", h(Badge, { variant: token[0], className: "s2p-token" }, token[1])),
      props.watch ? h(WatchLine, { watch: props.watch }) : null
    );
  }

  // Whether a `watch` runs (app/watch.py): plays, resume points and ratings come back only through one.
  function WatchLine(props) {
    const w = props.watch;
    return h(
      "div",
      { className: "s2p-watch", "data-running": w.running ? "yes" : "no" },
      "Watch ",
      w.running
        ? h(React.Fragment, null, h(Badge, { variant: "success", className: "s2p-state" }, "running"), " since ", h("span", { className: "s2p-since" }, when(w.since)))
        : h(Badge, { variant: w.problem ? "warning" : "secondary", className: "s2p-state" }, "not running")
    );
  }

  function Row(label, value, cls) {
    return h("tr", { className: cls }, h("th", null, label), h("td", null, value));
  }

  // A card of the page: a header, then its body.
  function TitledCard(className, title, ...body) {
    return h(Card, { className: "s2p-card " + className }, h(Card.Header, null, title), h(Card.Body, null, ...body));
  }

  // A card holding one label/value table (the queue, the statistics).
  function TableCard(className, title, rows) {
    return TitledCard(className, title, h(Table, { size: "sm", className: "s2p-kv" }, h("tbody", null, ...rows)));
  }

  function QueueCard(props) {
    const q = props.queue;
    return TableCard("s2p-queue", "Queue", [
      Row("Your edits waiting", q.interactive, "s2p-interactive"),
      Row("Bulk work waiting", q.bulk, "s2p-bulk"),
      Row("In flight", q.in_flight, "s2p-inflight"),
      Row("Waiting for a retry", q.retrying, "s2p-retrying"),
      Row("Next retry", when(q.next_retry_at), "s2p-next-retry"),
      Row("Background worker", props.drainer ? "running" : "idle", "s2p-drainer"),
    ]);
  }

  function StatsCard(props) {
    const s = props.status;
    const st = s.stats || {};
    return TableCard("s2p-stats", "Last sync and statistics", [
      Row("Last full/recent sync", when(s.last_full_sync), "s2p-last-sync"),
      Row(
        "Scenes in Plex",
        s.checked_at ? s.synced_scenes : s.synced_scenes ? s.synced_scenes + " so far (not every scene checked yet)" : "not checked yet",
        "s2p-synced-scenes"
      ),
      Row("Synced", st.synced || 0, "s2p-stat-synced"),
      Row("Unchanged", st.unchanged || 0, "s2p-stat-unchanged"),
      Row("Failed", st.failed_total || 0, "s2p-stat-failed"),
      Row("Retried", st.retried_total || 0, "s2p-stat-retried"),
      Row("Average Plex time", st.avg_plex_ms != null ? st.avg_plex_ms + " ms" : "n/a", "s2p-stat-avg"),
      Row("Last success", when(st.last_success_at), "s2p-stat-success"),
    ]);
  }

  // The dead letters the inbox does not list (a scene shows once): by reason, in the page's words.
  function DeadLetters(props) {
    const dlq = props.dlq;
    const shown = dlq.groups.filter((g) => !g.in_inbox);
    const inInbox = dlq.groups.filter((g) => g.in_inbox).reduce((n, g) => n + g.count, 0);
    const pointer = inInbox
      ? h("p", { className: "s2p-dlq-inbox" }, inInbox + (inInbox === 1 ? " more scene waits" : " more scenes wait") + " in the match inbox above.")
      : null;
    if (!shown.length) {
      const empty = !props.checked
        ? "Not checked yet: Sync all looks at every scene."
        : "No dead letters: every scene either synced, is queued, or waits in the match inbox.";
      return h(React.Fragment, null, h("p", { className: "s2p-dlq-empty" }, empty), pointer);
    }
    return h(
      "div",
      { className: "s2p-dlq" },
      pointer,
      shown.map((g) =>
        h(
          Card,
          { key: g.error_class, className: "s2p-card s2p-dlq-group", "data-reason": g.error_class },
          h(
            Card.Header,
            null,
            h("strong", null, g.label || g.error_class),
            " — ",
            g.count,
            g.count === 1 ? " scene" : " scenes",
            g.scenes.length < g.count ? ` (the newest ${g.scenes.length} listed)` : ""
          ),
          h(
            Card.Body,
            null,
            h("p", { className: "s2p-advice" }, g.advice),
            h(
              Table,
              { size: "sm", responsive: true, className: "s2p-dlq-table" },
              h("thead", null, h("tr", null, h("th", null, "Scene"), h("th", null, "Reason"), h("th", null, "Failed"), h("th", null, ""))),
              h(
                "tbody",
                null,
                g.scenes.map((s) =>
                  h(
                    "tr",
                    { key: s.scene_id, className: "s2p-dlq-entry", "data-scene-id": s.scene_id },
                    h("td", null, h(Link, { to: "/scenes/" + s.scene_id }, s.title || "Scene " + s.scene_id)),
                    h("td", { className: "s2p-reason" }, s.reason),
                    h("td", null, when(s.failed_at)),
                    h(
                      "td",
                      null,
                      h(
                        Button,
                        {
                          size: "sm",
                          variant: "secondary",
                          className: "s2p-retry",
                          disabled: props.busy,
                          onClick: () =>
                            props.act(
                              "Retry",
                              () => operation("ui_retry", { scene_id: String(s.scene_id) }),
                              (s.title || "Scene " + s.scene_id) + " is queued again; it leaves this list once synced."
                            ),
                        },
                        "Retry"
                      )
                    )
                  )
                )
              )
            )
          )
        )
      )
    );
  }

  function Problems(props) {
    const s = props.status;
    const out = [];
    if (s.plex.reachable === false) {
      out.push(
        h(
          Message,
          { key: "down", variant: "danger" },
          h("strong", null, "Plex is not reachable"),
          " since " + when(s.plex.since) + ". ",
          s.plex.problem ? s.plex.problem + ". " : "",
          "Edits stay queued and are written once Plex answers again."
        )
      );
    } else if (s.plex.token === "rejected" || s.plex.token === "missing") {
      out.push(
        h(
          Message,
          { key: "token", variant: "danger" },
          h("strong", null, s.plex.token === "missing" ? "No Plex token set. " : "Plex rejected the token. "),
          "Set it in Settings → Plugins → Stash2Plex."
        )
      );
    } else if (s.plex.problem) {
      out.push(h(Message, { key: "problem", variant: "warning" }, s.plex.problem));
    }
    (s.settings_problems || []).forEach((p, i) =>
      out.push(h(Message, { key: "setting-" + i, variant: "warning" }, p))
    );
    if (s.watch && s.watch.problem) {
      out.push(h(Message, { key: "watch", variant: "warning" }, h("span", { className: "s2p-watch-problem" }, s.watch.message)));
    }
    if (s.last_drainer_error && s.last_drainer_error.error) {
      out.push(h(Message, { key: "drainer", variant: "warning" }, "The background worker stopped: " + s.last_drainer_error.error));
    }
    if (s.performer_photos && s.performer_photos.reason) {
      const sentence = (t) => t.charAt(0).toUpperCase() + t.slice(1) + ".";
      out.push(
        h(Message, { key: "photos", variant: "warning" }, sentence(s.performer_photos.reason) + " " + sentence(s.performer_photos.fix))
      );
    }
    return out;
  }

  function PreviewTable(props) {
    const p = props.preview;
    // the plugin names each field and tag type (validation/fields.py LABELS)
    const nameOf = (key) => (p.labels && p.labels[key]) || key;
    const rows = [];
    p.scenes.forEach((scene) => {
      const label = h(Link, { to: "/scenes/" + scene.scene_id }, scene.title || "Scene " + scene.scene_id);
      const row = (field, name, before, after) =>
        h(
          "tr",
          { key: scene.scene_id + ":" + field, className: "s2p-plan-row", "data-scene-id": scene.scene_id, "data-field": field },
          h("td", null, label),
          h("td", null, name),
          before,
          after
        );
      scene.fields.forEach((f) =>
        rows.push(
          row(
            f.field,
            nameOf(f.field),
            h("td", { className: "s2p-plan-current" }, f.current || "(empty)"),
            h("td", { className: "s2p-plan-new" }, f.new || "(empty)")
          )
        )
      );
      scene.tags.forEach((t) =>
        rows.push(
          row(
            t.type,
            nameOf(t.type),
            h("td", { className: "s2p-plan-removed" }, t.removed.map((n) => "−" + n).join(", ")),
            h(
              "td",
              { className: "s2p-plan-added" },
              t.added.map((n) => "+" + n).concat((t.photos || []).map((n) => "photo of " + n)).join(", ")
            )
          )
        )
      );
      if (scene.poster === "upload" || scene.poster === "restore") {
        const restore = scene.poster === "restore";
        rows.push(
          row(
            "poster",
            nameOf("poster"),
            h("td", { className: "s2p-plan-current" }, restore ? "another scene's cover" : "Plex's poster"),
            h("td", { className: "s2p-plan-new" }, restore ? "Plex's own poster" : "Stash's cover")
          )
        );
      }
    });
    return TitledCard(
      "s2p-preview",
      "Preview: what Sync all would write to Plex",
      h(
        "p",
        { className: "s2p-preview-summary" },
        p.checked + " scenes checked; " + p.scenes.length + " would change in Plex" + (p.more ? " (the first " + (p.scenes.length + p.unmatched.length) + " shown)" : "") + "."
      ),
      rows.length
        ? h(
            Table,
            { size: "sm", responsive: true, className: "s2p-plan" },
            h("thead", null, h("tr", null, h("th", null, "Scene"), h("th", null, "Field"), h("th", null, "In Plex now / −removed"), h("th", null, "After the sync / +added"))),
            h("tbody", null, rows)
          )
        : h("p", { className: "s2p-plan-empty" }, "Nothing to write: Plex already shows what Stash holds."),
      p.unmatched.length
        ? h(
            "ul",
            { className: "s2p-plan-failed" },
            p.unmatched.map((f) => h("li", { key: f.scene_id }, (f.title || "Scene " + f.scene_id) + ": " + f.reason))
          )
        : null,
      h(
        "div",
        { className: "s2p-actions" },
        h(Button, { className: "s2p-confirm", disabled: props.busy || !rows.length, onClick: props.confirm }, "Confirm: sync now"),
        h(Button, { variant: "secondary", className: "s2p-cancel", onClick: props.cancel }, "Cancel")
      )
    );
  }

  // `?scene=<id>`: the page opens with that scene's Plex state (the navbar link on a scene
  // page leads here: before Stash v0.28 a scene page has no tab a plugin can add).
  function sceneOf(search) {
    const id = new URLSearchParams(search || "").get("scene");
    return id && /^[1-9][0-9]{0,18}$/.test(id) ? id : null;
  }

  function Stash2PlexPage() {
    const plugin = usePlugin();
    const sceneId = sceneOf(useLocation().search);
    if (plugin === null) return h("div", { className: "s2p-page" }, h(Spinner, { animation: "border", size: "sm" }));
    if (!plugin.enabled) return h("div", { className: "s2p-page" }, h("h2", null, "Stash2Plex"), h(DisabledMessage));
    return h(
      React.Fragment,
      null,
      sceneId
        ? h(
            "div",
            { className: "s2p-page s2p-scene-focus" },
            TitledCard("s2p-scene-card", h(React.Fragment, null, "Scene ", h(Link, { to: "/scenes/" + sceneId }, "#" + sceneId), " in Plex"), h(ScenePanel, { key: sceneId, sceneId: sceneId }))
          )
        : null,
      h(StatusPage)
    );
  }

  // A task started from the page (runPluginTask): its progress while it runs, then that it is done.
  function useTask(onEnd) {
    const [task, setTask] = React.useState(null); // {id, label, status, progress, polls, done}
    React.useEffect(() => {
      if (!task || task.done) return undefined;
      let live = true;
      const timer = setTimeout(
        () =>
          client()
            .query({ query: FIND_JOB, variables: { input: { id: task.id } }, fetchPolicy: "network-only" })
            .then((r) => {
              if (!live) return;
              const job = r.data.findJob;
              const status = job ? job.status : "FINISHED"; // gone from Stash's list: it ended a while ago
              const done = status in JOB_ENDED;
              setTask(Object.assign({}, task, { status: status, progress: job ? job.progress : null, polls: task.polls + 1, done: done }));
              if (done) onEnd();
            })
            .catch(() => live && setTask(Object.assign({}, task, { polls: task.polls + 1 }))),
        task.polls ? POLL_MS : 300
      );
      return () => {
        live = false;
        clearTimeout(timer);
      };
      // eslint-disable-next-line react-hooks/exhaustive-deps
    }, [task]);
    const start = async (label, what) => setTask({ id: await runTask(what), label: label, status: "READY", progress: null, polls: 0, done: false });
    return [task, start];
  }

  function TaskLine(props) {
    const t = props.task;
    if (t.done) {
      return h(Message, { variant: t.status === "FINISHED" ? "success" : "warning" }, h("span", { className: "s2p-task-done" }, t.label + " " + JOB_ENDED[t.status] + "."));
    }
    const share = t.progress != null ? Math.round(t.progress * 100) : null;
    return h(
      Message,
      { variant: "info" },
      h("div", { className: "s2p-task", "data-status": t.status }, t.label + (t.status === "READY" ? " is waiting in Stash's job queue…" : " is running…")),
      h(ProgressBar, { className: "s2p-task-progress", animated: share == null, now: share == null ? 100 : share, label: share == null ? "" : share + " %" })
    );
  }

  // What the inbox reloads on: any change the status shows, and every Refresh.
  function stampOf(s, refreshes) {
    return [refreshes, s.checked_at, s.last_full_sync, s.synced_scenes, s.dlq.count, s.queue.pending, s.queue.retrying, s.drainer_running].join("|");
  }

  function StatusPage() {
    const [preview, setPreview] = React.useState(null);
    const [notice, setNotice] = React.useState(null);
    const [busy, setBusy] = React.useState(false);
    const [started, setStarted] = React.useState(0);
    const [refreshes, setRefreshes] = React.useState(0);
    const [task, startTask] = useTask(() => setStarted(Date.now()));
    const running = !!task && !task.done;
    const [result, refresh] = usePolled(
      () => operation("ui_status"),
      (s) => running || s.drainer_running || s.queue.pending > 0 || Date.now() - started < 10000,
      [started, running]
    );

    async function act(label, fn, done) {
      setBusy(true);
      setNotice(null);
      try {
        await fn();
        if (done) setNotice({ variant: "success", text: done });
        setStarted(Date.now());
      } catch (err) {
        setNotice({ variant: "danger", text: label + " failed: " + errorText(err) });
      } finally {
        setBusy(false);
      }
    }
    const syncAll = () => act("Sync all", () => startTask("Sync all", TASKS.syncAll), null);

    const s = result.data;
    const header = h(
      "div",
      { className: "s2p-header" },
      h("h2", null, "Stash2Plex"),
      h(
        "div",
        { className: "s2p-actions" },
        h(Button, { className: "s2p-sync-all", disabled: busy || running, onClick: syncAll }, "Sync all"),
        h(
          Button,
          {
            className: "s2p-preview-button",
            variant: "secondary",
            disabled: busy,
            onClick: () =>
              act(
                "Preview",
                async () => {
                  setPreview(null);
                  setPreview(await operation("ui_preview"));
                },
                null
              ),
          },
          "Preview"
        ),
        h(Button, { className: "s2p-verify", variant: "secondary", disabled: busy || running, onClick: () => act("Verify", () => startTask("Verify", TASKS.verify), null) }, "Verify"),
        h(
          Button,
          { className: "s2p-retry-all", variant: "secondary", disabled: busy || running || !(s && s.dlq.count), onClick: () => act("Retry all", () => startTask("Retry all", TASKS.retryAll), null) },
          "Retry all"
        ),
        h(
          Button,
          {
            className: "s2p-refresh",
            variant: "secondary",
            disabled: busy,
            onClick: () => {
              setRefreshes((n) => n + 1);
              refresh();
            },
          },
          "Refresh"
        )
      )
    );
    if (!s) {
      return h(
        "div",
        { className: "s2p-page" },
        header,
        result.error
          ? h(Message, { variant: "danger" }, "Stash2Plex could not be asked for its state: " + result.error)
          : h(Spinner, { animation: "border", size: "sm" })
      );
    }
    const unchecked =
      !s.checked_at && !running
        ? h(
            Message,
            { variant: "info" },
            h(
              "div",
              { className: "s2p-unchecked" },
              h("strong", null, "Not checked yet. "),
              "Stash2Plex has not looked for every scene's Plex item, so the counts and lists below are not the whole story. ",
              h(Button, { size: "sm", className: "s2p-check-now", disabled: busy, onClick: syncAll }, "Sync all"),
              " checks every scene, writes what differs to Plex and lists here what it cannot settle."
            )
          )
        : null;
    return h(
      "div",
      { className: "s2p-page" },
      header,
      result.error ? h(Message, { variant: "danger" }, "Refreshing failed: " + result.error) : null,
      notice ? h(Message, { variant: notice.variant }, notice.text) : null,
      task ? h(TaskLine, { task: task }) : null,
      unchecked,
      h(Problems, { status: s }),
      preview
        ? h(PreviewTable, {
            preview: preview,
            busy: busy || running,
            cancel: () => setPreview(null),
            confirm: () =>
              act(
                "Sync",
                async () => {
                  await startTask("Sync all", TASKS.syncAll);
                  setPreview(null);
                },
                null
              ),
          })
        : null,
      h(
        "div",
        { className: "s2p-cards" },
        h(PlexCard, { plex: s.plex, watch: s.watch }),
        h(QueueCard, { queue: s.queue, drainer: s.drainer_running }),
        h(StatsCard, { status: s })
      ),
      window.Stash2Plex && window.Stash2Plex.Inbox
        ? h(window.Stash2Plex.Inbox, { stamp: stampOf(s, refreshes), checked: !!s.checked_at, onChange: () => setStarted(Date.now()) })
        : null,
      h(
        "h3",
        null,
        "Dead-letter queue ",
        h(DlqCount, { dlq: s.dlq })
      ),
      h(DeadLetters, { dlq: s.dlq, act: act, busy: busy, checked: !!s.checked_at })
    );
  }

  function DlqCount(props) {
    const n = props.dlq.groups.filter((g) => !g.in_inbox).reduce((sum, g) => sum + g.count, 0);
    return h(Badge, { variant: n ? "danger" : "secondary", className: "s2p-dlq-count" }, n);
  }

  // -- the scene panel -----------------------------------------------------------------
  const SCENE_STATES = {
    in_sync: ["success", "In sync"],
    waiting: ["info", "Waiting"],
    dead_lettered: ["danger", "Dead-lettered"],
    changed: ["warning", "Changed since last written"],
    never_synced: ["secondary", "Never written to Plex"],
    out_of_scope: ["secondary", "Not synced (left out by the settings)"],
  };

  function ScenePanel(props) {
    const enabled = usePluginEnabled();
    if (enabled === null) return h("div", { className: "s2p-scene-panel" }, h(Spinner, { animation: "border", size: "sm" }));
    if (!enabled) return h("div", { className: "s2p-scene-panel" }, h(DisabledMessage));
    return h(SceneState, props);
  }

  function SceneState(props) {
    const [notice, setNotice] = React.useState(null);
    const [started, setStarted] = React.useState(0);
    const [result, refresh] = usePolled(
      () => operation("ui_scene", { scene_id: String(props.sceneId) }),
      (d) => d.state === "waiting" || Date.now() - started < 10000,
      [props.sceneId, started]
    );
    const d = result.data;
    if (!d) {
      return h(
        "div",
        { className: "s2p-scene-panel" },
        result.error ? h(Message, { variant: "danger" }, "Stash2Plex could not be asked: " + result.error) : h(Spinner, { animation: "border", size: "sm" })
      );
    }
    const state = SCENE_STATES[d.state] || ["secondary", d.state];
    async function syncNow() {
      setNotice(null);
      try {
        await operation("ui_sync_scene", { scene_id: String(props.sceneId) });
        setNotice("Queued: the scene is written to Plex in a moment.");
        setStarted(Date.now());
      } catch (err) {
        setNotice("Sync failed to start: " + errorText(err));
      }
    }
    async function unpin() {
      setNotice(null);
      try {
        await operation("ui_unpin", { scene_id: String(props.sceneId) });
        setNotice("Answer removed: the matcher decides again, and the scene is queued.");
        setStarted(Date.now());
      } catch (err) {
        setNotice("Unpin failed: " + errorText(err));
      }
    }
    const pinned = d.pin
      ? d.pin.answer === "item"
        ? "pinned to Plex item #" + d.pin.rating_key
        : d.pin.answer === "not_in_plex"
          ? "Not in Plex"
          : "Skip this scene"
      : null;
    return h(
      "div",
      { className: "s2p-scene-panel", "data-state": d.state },
      h(
        "div",
        { className: "s2p-scene-state" },
        h(Badge, { variant: state[0], className: "s2p-state" }, state[1]),
        h(Button, { size: "sm", className: "s2p-sync-now", onClick: syncNow }, "Sync now"),
        h(Button, { size: "sm", variant: "secondary", className: "s2p-refresh", onClick: refresh }, "Refresh")
      ),
      notice ? h("p", { className: "s2p-notice" }, notice) : null,
      d.reason ? h("p", { className: "s2p-reason" }, d.reason) : null,
      d.advice ? h("p", { className: "s2p-advice" }, d.advice) : null,
      h(
        Table,
        { size: "sm", className: "s2p-kv" },
        h(
          "tbody",
          null,
          Row("Plex item", d.rating_key != null ? "#" + d.rating_key : "not linked yet", "s2p-item"),
          Row("Library", d.library || (d.rating_key != null ? "unknown (Plex did not answer)" : "—"), "s2p-library"),
          Row("File in Plex", d.plex_path || "—", "s2p-path"),
          Row("Last written", when(d.last_written), "s2p-last-written"),
          d.next_retry_at ? Row("Next retry", when(d.next_retry_at), "s2p-next-retry") : null,
          pinned
            ? Row(
                "Your answer",
                h(React.Fragment, null, pinned + " ", h(Button, { size: "sm", variant: "secondary", className: "s2p-unpin", onClick: unpin }, "Unpin")),
                "s2p-pin"
              )
            : null
        )
      )
    );
  }

  // Shared with the other files of `ui:` (ui/inbox.js): run after this one, looked up at render time.
  const shared = (window.Stash2Plex = window.Stash2Plex || {});
  Object.assign(shared, { client: client, operation: operation, errorText: errorText, Message: Message });

  // -- wiring into Stash's UI ----------------------------------------------------------
  api.register.route(ROUTE, Stash2PlexPage);

  // The navbar link: on a scene page it opens the page with that scene's Plex state.
  function PlexNavLink() {
    const scene = /^\/scenes\/([1-9][0-9]{0,18})(?:\/|$)/.exec(useLocation().pathname);
    return h(
      NavLink,
      { className: "nav-utility s2p-nav-link", exact: true, to: scene ? ROUTE + "?scene=" + scene[1] : ROUTE, "data-scene-id": scene ? scene[1] : undefined },
      h(Button, { className: "minimal d-flex align-items-center h-100", title: scene ? "Stash2Plex: this scene in Plex" : "Stash2Plex" }, "Plex")
    );
  }

  api.patch.before("MainNavBar.UtilityItems", function (props) {
    return [Object.assign({}, props, { children: h(React.Fragment, null, props.children, h(PlexNavLink, { key: "stash2plex" })) })];
  });

  // Before Stash v0.28 the app draws its pages before plugin JavaScript runs (there is no
  // PluginsLoader), so the route and the navbar link above show only once that part is drawn
  // again. Until they show, ask the router to draw the current location again, as the
  // browser's back and forward buttons do (a popstate event for the same address). From v0.28
  // they show at once and nothing is asked.
  function redrawWhileMissing(tries) {
    const app = document.querySelector(".navbar");
    const missing = !document.querySelector(".s2p-nav-link") || (window.location.pathname === ROUTE && !document.querySelector(".s2p-page"));
    if (app && !missing) return;
    if (app) {
      window.history.replaceState(window.history.state, "", window.location.href);
      window.dispatchEvent(new PopStateEvent("popstate", { state: window.history.state }));
    }
    if (tries < 40) setTimeout(() => redrawWhileMissing(tries + 1), 250);
  }
  redrawWhileMissing(0);

  api.patch.before("ScenePage.Tabs", function (props) {
    const tab = h(Nav.Item, { key: "stash2plex" }, h(Nav.Link, { eventKey: "stash2plex-panel", className: "s2p-tab" }, "Plex"));
    return [Object.assign({}, props, { children: h(React.Fragment, null, props.children, tab) })];
  });

  api.patch.before("ScenePage.TabContent", function (props) {
    const pane = h(
      Tab.Pane,
      { key: "stash2plex", eventKey: "stash2plex-panel", mountOnEnter: true },
      h(ScenePanel, { sceneId: props.scene.id })
    );
    return [Object.assign({}, props, { children: h(React.Fragment, null, props.children, pane) })];
  });
})();

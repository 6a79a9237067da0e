// The match inbox on the Stash2Plex page: every scene the matcher could not settle, its
// Stash file(s) beside the Plex candidates, and one click to settle it (tasks/inbox.py,
// tasks/pins.py). Runs after ui/stash2plex.js (Stash2Plex.yml `ui:`), whose helpers it
// uses through window.Stash2Plex. Everything from a server is shown as text: React
// escapes it; no HTML is ever built from it, and only `data:image/` thumbnails and
// http(s) screenshot URLs reach an <img>.
(function () {
  "use strict";

  const api = window.PluginApi;
  const shared = window.Stash2Plex;
  if (!api || !shared) return;
  const React = api.React;
  const h = React.createElement;
  const { Badge, Button, Card, Form, Spinner, Table } = api.libraries.Bootstrap;
  const { Link } = api.libraries.ReactRouterDOM;
  const { gql } = api.libraries.Apollo;
  const { operation, errorText, Message, client } = shared;

  const PLUGIN_ID = "Stash2Plex";
  const PER_PAGE = 10;
  const KIND = {
    ambiguous: ["warning", "Several Plex items fit"],
    unmatched: ["danger", "Not found in Plex"],
    loose: ["info", "Matched by file name only"],
  };
  // What the card says first, in the user's words (the matcher's reason follows, below the choice).
  function lead(s) {
    if (s.kind === "ambiguous") {
      return s.candidates.length > 1
        ? "Several Plex items have this scene's file name. Choose the one that is this scene (This one); the others are left as they are."
        : "The only Plex item with this scene's file name could not be confirmed as its file. If it is this scene, choose This one.";
    }
    if (s.kind === "unmatched") return "Plex has no item at this scene's path. Choose its item if Plex has it under another name, or mark it.";
    return "Written to the Plex item below, found by its file name only. Confirm it with This one, or choose another.";
  }
  const PLUGIN_SETTINGS = gql`
    query Stash2PlexSettings($include: [ID!]) {
      configuration {
        plugins(include: $include)
      }
    }
  `;
  const CONFIGURE = gql`
    mutation Stash2PlexConfigure($plugin_id: ID!, $input: Map!) {
      configurePlugin(plugin_id: $plugin_id, input: $input)
    }
  `;

  function size(bytes) {
    if (bytes == null) return "size unknown";
    const units = ["bytes", "KB", "MB", "GB", "TB"];
    let n = Number(bytes);
    let i = 0;
    while (n >= 1024 && i < units.length - 1) {
      n /= 1024;
      i += 1;
    }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function duration(seconds) {
    if (seconds == null) return "duration unknown";
    const s = Math.round(Number(seconds));
    const mm = Math.floor(s / 60);
    return mm + ":" + String(s % 60).padStart(2, "0");
  }

  function safeImage(url, kind) {
    if (typeof url !== "string") return null;
    if (kind === "data") return /^data:image\/(png|jpeg|webp);base64,[A-Za-z0-9+/=]+$/.test(url) ? url : null;
    return /^https?:\/\//i.test(url) || /^\/[^/]/.test(url) ? url : null;
  }

  // A Plex item's poster, read by the plugin for the whole page (the token never reaches the page).
  function PlexThumb(props) {
    const src = safeImage(props.images[String(props.ratingKey)], "data");
    return src
      ? h("img", { className: "s2p-thumb", src: src, alt: "Plex item " + props.ratingKey })
      : h("div", { className: "s2p-thumb s2p-thumb-empty" });
  }

  function Evidence(props) {
    const c = props.candidate;
    const mark = (same) => (same === true ? " ✓" : same === false ? " ✗" : "");
    return h(
      "span",
      { className: "s2p-evidence" },
      size(c.size) + mark(c.same_size) + " · " + duration(c.duration) + mark(c.same_duration)
    );
  }

  function InboxScene(props) {
    const s = props.scene;
    const kind = KIND[s.kind] || ["secondary", s.kind];
    const name = s.title || "Scene " + s.scene_id;
    const shot = safeImage(s.screenshot, "url");
    const answer = (label, args, done, follow) => props.act(label, () => operation("ui_pin", Object.assign({ scene_id: String(s.scene_id) }, args)), done, follow);
    return h(
      Card,
      { className: "s2p-card s2p-inbox-scene", "data-scene-id": s.scene_id, "data-kind": s.kind },
      h(
        Card.Header,
        null,
        h(Link, { to: "/scenes/" + s.scene_id, className: "s2p-inbox-title" }, name),
        " ",
        h(Badge, { variant: kind[0], className: "s2p-kind" }, kind[1])
      ),
      h(
        Card.Body,
        null,
        h("p", { className: "s2p-lead" }, lead(s)),
        h(
          "div",
          { className: "s2p-inbox-sides" },
          h(
            "div",
            { className: "s2p-inbox-stash" },
            h("h6", null, "In Stash"),
            shot ? h("img", { className: "s2p-thumb", src: shot, alt: name }) : null,
            s.files.map((f, i) =>
              h(
                "div",
                { key: i, className: "s2p-stash-file" },
                h("div", { className: "s2p-path" }, f.path),
                h("div", { className: "s2p-mapped" }, "looked for in Plex as " + f.mapped_path),
                h("div", { className: "s2p-evidence" }, size(f.size) + " · " + duration(f.duration))
              )
            )
          ),
          h(
            "div",
            { className: "s2p-inbox-plex" },
            h("h6", null, "Plex candidates"),
            s.candidates.length
              ? h(
                  Table,
                  { size: "sm", responsive: true, className: "s2p-candidates" },
                  h(
                    "tbody",
                    null,
                    s.candidates.map((c) =>
                      h(
                        "tr",
                        { key: c.rating_key, className: "s2p-candidate", "data-rating-key": c.rating_key },
                        h("td", null, h(PlexThumb, { ratingKey: c.rating_key, images: props.images })),
                        h(
                          "td",
                          null,
                          h("div", { className: "s2p-library" }, c.library + " · #" + c.rating_key + (c.rating_key === s.linked ? " · linked now" : "")),
                          c.held_by ? h("div", { className: "s2p-held-by" }, "Scene #" + c.held_by + "'s item") : null,
                          h("div", { className: "s2p-path" }, c.path),
                          h(Evidence, { candidate: c })
                        ),
                        h(
                          "td",
                          null,
                          h(
                            Button,
                            {
                              size: "sm",
                              className: "s2p-this-one",
                              disabled: props.busy,
                              onClick: () =>
                                answer("This one", { answer: "item", rating_key: String(c.rating_key) }, name + " is pinned to Plex item #" + c.rating_key + " and syncs now…", {
                                  sceneId: s.scene_id,
                                  name: name,
                                  ratingKey: c.rating_key,
                                }),
                            },
                            "This one"
                          )
                        )
                      )
                    )
                  )
                )
              : h(
                  "p",
                  { className: "s2p-no-candidates" },
                  props.plexProblem ? "Plex's files could not be read: " + props.plexProblem : "Plex has no file of this name or size."
                )
          )
        ),
        h("p", { className: "s2p-reason" }, s.reason),
        h(
          "div",
          { className: "s2p-actions" },
          s.kind === "unmatched"
            ? h(
                Button,
                {
                  size: "sm",
                  variant: "secondary",
                  className: "s2p-look-again",
                  disabled: props.busy,
                  onClick: () =>
                    props.act("Look again", () => operation("ui_retry", { scene_id: String(s.scene_id) }), name + " is looked for in Plex again…", {
                      sceneId: s.scene_id,
                      name: name,
                      ratingKey: null,
                    }),
                },
                "Look again"
              )
            : null,
          h(Button, { size: "sm", variant: "secondary", className: "s2p-not-in-plex", disabled: props.busy, onClick: () => answer("Not in Plex", { answer: "not_in_plex" }, name + " is marked Not in Plex.") }, "Not in Plex"),
          h(Button, { size: "sm", variant: "secondary", className: "s2p-skip", disabled: props.busy, onClick: () => answer("Skip this scene", { answer: "skip" }, name + " is skipped: it is not synced.") }, "Skip this scene")
        )
      )
    );
  }

  // The path_map rule plex/suggest.py finds for the inbox, with every scene it would match,
  // shown before it is saved through configurePlugin.
  function PathHelp(props) {
    const help = props.help;
    if (!help || !help.rule) return null;
    async function save() {
      const current = await client().query({ query: PLUGIN_SETTINGS, variables: { include: [PLUGIN_ID] }, fetchPolicy: "network-only" });
      const settings = Object.assign({}, (current.data.configuration.plugins || {})[PLUGIN_ID] || {}, { path_map: help.path_map });
      await client().mutate({ mutation: CONFIGURE, variables: { plugin_id: PLUGIN_ID, input: settings } });
      await operation("ui_recheck");
    }
    return h(
      Message,
      { variant: "info" },
      h(
        "div",
        { className: "s2p-path-help" },
        "These scenes are looked for in a folder Plex does not have. The Path map (path_map) rule ",
        h("code", { className: "s2p-rule" }, help.rule),
        " would match ",
        h("strong", { className: "s2p-fixes" }, help.fixes + " scenes"),
        " exactly, each to the one Plex item with its file name (none of them is a scene several Plex items fit):",
        h(
          "ul",
          { className: "s2p-rule-matches" },
          help.matches.map((m) =>
            h("li", { key: m.scene_id, className: "s2p-rule-match", "data-scene-id": m.scene_id }, (m.title || "Scene " + m.scene_id) + ": " + m.stash_path + " → " + m.plex_path)
          )
        ),
        h(Button, { size: "sm", className: "s2p-save-rule", disabled: props.busy, onClick: () => props.act("Save path_map", save, "Path map saved; the inbox's scenes are matched again…") }, "Save to Path map and re-check")
      )
    );
  }

  // After a pin: the scene's state until it is synced (or why it is not), from ui_scene.
  function useFollow(setNotice) {
    const [follow, setFollow] = React.useState(null); // {sceneId, name, ratingKey, until}
    React.useEffect(() => {
      if (!follow) return undefined;
      let live = true;
      const timer = setTimeout(() => {
        operation("ui_scene", { scene_id: String(follow.sceneId) })
          .then((d) => {
            if (!live) return;
            if (d.state === "in_sync") {
              setNotice({ variant: "success", text: follow.name + " is synced to Plex" + (follow.ratingKey ? " item #" + follow.ratingKey : "") + "." });
            } else if (d.state === "dead_lettered" || d.state === "out_of_scope") {
              setNotice({ variant: "danger", text: follow.name + " did not sync: " + (d.reason || "see the scene's Plex tab") });
            } else if (Date.now() < follow.until) {
              if (d.reason) setNotice({ variant: "warning", text: follow.name + " waits for a retry: " + d.reason });
              setFollow(Object.assign({}, follow));
              return;
            } else {
              setNotice({ variant: "warning", text: follow.name + " is not synced yet; its Plex tab shows where it stands." });
            }
            setFollow(null);
          })
          .catch((err) => live && (setNotice({ variant: "danger", text: "Could not follow " + follow.name + ": " + errorText(err) }), setFollow(null)));
      }, 1000);
      return () => {
        live = false;
        clearTimeout(timer);
      };
      // eslint-disable-next-line react-hooks/exhaustive-deps
    }, [follow]);
    return (what) => setFollow(Object.assign({ until: Date.now() + 60000 }, what));
  }

  function Inbox(props) {
    const [query, setQuery] = React.useState("");
    const [typed, setTyped] = React.useState("");
    const [page, setPage] = React.useState(1);
    const [tick, setTick] = React.useState(0);
    const [data, setData] = React.useState(null);
    const [help, setHelp] = React.useState(null);
    const [images, setImages] = React.useState({});
    const [error, setError] = React.useState(null);
    const [busy, setBusy] = React.useState(false);
    const [notice, setNotice] = React.useState(null);
    const [until, setUntil] = React.useState(0);

    React.useEffect(() => {
      const timer = setTimeout(() => {
        setQuery(typed.trim());
        setPage(1);
      }, 300);
      return () => clearTimeout(timer);
    }, [typed]);

    React.useEffect(() => {
      let live = true;
      let timer = null;
      operation("ui_inbox", { page: String(page), per_page: String(PER_PAGE), query: query })
        .then((d) => {
          if (!live) return;
          setData(d);
          setError(null);
          if (Date.now() < until) timer = setTimeout(() => live && setTick((t) => t + 1), 2000);
        })
        .catch((err) => live && setError(errorText(err)));
      return () => {
        live = false;
        if (timer) clearTimeout(timer);
      };
    }, [page, query, tick, until, props.stamp]);

    const keys = data ? [...new Set(data.scenes.flatMap((s) => s.candidates.map((c) => c.rating_key)))].join(",") : "";
    React.useEffect(() => {
      let live = true;
      if (keys) {
        operation("ui_thumbs", { rating_keys: keys })
          .then((r) => live && setImages((old) => Object.assign({}, old, (r && r.images) || {})))
          .catch(() => undefined);
      }
      return () => {
        live = false;
      };
    }, [keys]);

    React.useEffect(() => {
      let live = true;
      operation("ui_path_help")
        .then((d) => live && setHelp(d))
        .catch(() => undefined);
      return () => {
        live = false;
      };
    }, [until, props.stamp, data ? data.total : -1]);

    const follow = useFollow(setNotice);
    async function act(label, fn, done, followed) {
      setBusy(true);
      setNotice(null);
      try {
        await fn();
        setNotice({ variant: "info", text: done });
        if (followed) follow(followed);
        setUntil(Date.now() + 20000); // follow the sync for a while: answered scenes leave the list
        if (props.onChange) props.onChange();
      } catch (err) {
        setNotice({ variant: "danger", text: label + " failed: " + errorText(err) });
      } finally {
        setBusy(false);
      }
    }

    const counts = data ? data.counts : { ambiguous: 0, unmatched: 0, loose: 0 };
    const all = counts.ambiguous + counts.unmatched + counts.loose;
    const pages = data ? Math.max(1, Math.ceil(data.total / data.per_page)) : 1;
    return h(
      "div",
      { className: "s2p-inbox" },
      h(
        "h3",
        null,
        "Match inbox ",
        data
          ? h(Badge, { variant: all ? "warning" : "secondary", className: "s2p-inbox-count" }, all)
          : h(Spinner, { animation: "border", size: "sm", className: "s2p-inbox-loading" })
      ),
      error ? h(Message, { variant: "danger" }, "The inbox could not be read: " + error) : null,
      notice ? h(Message, { variant: notice.variant }, notice.text) : null,
      h(PathHelp, { help: help, act: act, busy: busy }),
      data && !all
        ? h(
            "p",
            { className: "s2p-inbox-empty" },
            props.checked
              ? "Nothing to settle: every scene has a Plex item found by its path, or an answer."
              : "Not checked yet: the scenes Sync all cannot settle show here."
          )
        : null,
      data && all
        ? h(
            "div",
            { className: "s2p-inbox-bar" },
            h("span", { className: "s2p-inbox-counts" }, counts.ambiguous + " ambiguous · " + counts.unmatched + " not found · " + counts.loose + " by name only"),
            h(Form.Control, {
              className: "s2p-inbox-search",
              size: "sm",
              type: "search",
              placeholder: "Search title, scene id or reason",
              value: typed,
              onChange: (e) => setTyped(e.target.value),
            }),
            h(
              "span",
              { className: "s2p-pager" },
              h(Button, { size: "sm", variant: "secondary", className: "s2p-prev", disabled: page <= 1, onClick: () => setPage(page - 1) }, "‹"),
              h("span", { className: "s2p-page-of" }, " " + data.page + " / " + pages + " "),
              h(Button, { size: "sm", variant: "secondary", className: "s2p-next", disabled: page >= pages, onClick: () => setPage(page + 1) }, "›")
            )
          )
        : null,
      data ? data.scenes.map((s) => h(InboxScene, { key: s.scene_id, scene: s, images: images, act: act, busy: busy, plexProblem: data.plex_problem })) : null
    );
  }

  shared.Inbox = Inbox;
})();

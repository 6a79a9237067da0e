import time
def test_timing(plugin):
    for n in range(200):
        plugin.add_scene(n)
    plugin.plex.latency = 0.01
    t = time.time()
    run = plugin.task("all")
    print("all", time.time() - t, run.output, run.error)
    print(len(plugin.plex.requests), {r["method"] for r in plugin.plex.requests})
    from collections import Counter
    print(Counter((r["method"], r["path"].split("/")[1:3][0]) for r in plugin.plex.requests))

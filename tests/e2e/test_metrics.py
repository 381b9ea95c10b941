"""GET /metrics on every API listener (not the guests' metadata listener): Prometheus's text format, series labelled
by route pattern (never by path), and the counts and histograms growing with
what the cloud did -- requests, bus calls, database transactions, scheduler
decisions and the filter that rejected a host. [metrics] enabled = false
turns it off."""
import re

from conftest import unique

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)\})? (\S+)$')


def scrape(c, port=None):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port or c.port, timeout=30)
    conn.request("GET", "/metrics")
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, r.getheader("Content-Type"), body


def parse(text):
    """{(name, labels-text): value}, checking every line is a comment or a
    well-formed sample and every family has HELP and TYPE before it."""
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP "):
            continue
        m = SAMPLE.match(line)
        assert m, "malformed sample line: %r" % line
        base = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
        assert m.group(1) in typed or base in typed, "no TYPE before %s" % line
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def value(samples, name, **labels):
    """Sum of name's samples whose labels include all of labels."""
    total, found = 0.0, False
    for (n, ls), v in samples.items():
        if n != name:
            continue
        if all('%s="%s"' % kv in ls for kv in labels.items()):
            total, found = total + v, True
    assert found, "no %s%s in the scrape" % (name, labels)
    return total


def test_metrics_follow_what_the_cloud_does(fresh_cloud):
    c = fresh_cloud("--fake-hosts", "1")
    st, ctype, body = scrape(c)
    assert st == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8"
    before = parse(body)
    assert value(before, "process_resident_memory_bytes") > 1 << 20
    tok = c.token()
    g = c.cli("server", "group", "create", "--policy", "anti-affinity", unique("aa"), "-f", "json")
    first = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--hint",
                  "group=%s" % g["id"], "--wait", unique("one"), "-f", "json")
    c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--hint",
          "group=%s" % g["id"], "--wait", unique("two"), check=False)
    for _ in range(3):
        st, _, _ = c.request("GET", "/compute/v2.1/servers/%s" % first["id"], token=tok)
        assert st == 200
    st, _, _ = c.request("GET", "/compute/v2.1/servers/%s" % ("0" * 32), token=tok)
    assert st == 404

    after = parse(scrape(c)[2])
    # a route's pattern labels the series, the server's ID appears nowhere
    assert first["id"] not in "".join(ls for _, ls in after)
    route = [ls for (n, ls) in after if n == "nubo_http_request_duration_seconds_count"
             and 'method="GET"' in ls and "servers/{" in ls and 'status="200"' in ls]
    assert len(route) == 1, route
    assert after[("nubo_http_request_duration_seconds_count", route[0])] >= 3
    assert value(after, "nubo_http_request_duration_seconds_count", service="compute",
                 status="404") >= 1
    # the histogram's buckets are cumulative and end at the count
    buckets = sorted((float(re.search(r'le="([^"]+)"', ls).group(1).replace("+Inf", "inf")), v)
                     for (n, ls), v in after.items()
                     if n == "nubo_http_request_duration_seconds_bucket"
                     and ls.startswith(route[0][:-1]))
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert buckets[-1][1] == after[("nubo_http_request_duration_seconds_count", route[0])]
    # what the two boots did underneath
    assert value(after, "nubo_scheduler_decisions_total", outcome="selected") >= 1
    assert value(after, "nubo_scheduler_decisions_total", outcome="no_valid_host") >= 1
    assert value(after, "nubo_scheduler_filter_rejections_total",
                 filter="ServerGroupAntiAffinityFilter") >= 1
    assert value(after, "nubo_db_transaction_duration_seconds_count", outcome="commit") > \
        value(before, "nubo_db_transaction_duration_seconds_count", outcome="commit")
    assert value(after, "nubo_bus_casts_total", outcome="ok") >= 1
    # the metadata listener faces guests: it tells them nothing of the cloud
    st, _, body = scrape(c, c.port + 1)
    assert st == 400 and "nubo_" not in body


def test_metrics_can_be_turned_off(fresh_cloud):
    c = fresh_cloud("--set", "metrics.enabled=false")
    st, _, _ = scrape(c)
    assert st == 404

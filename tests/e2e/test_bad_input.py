"""Bad input gets an OpenStack-style error naming the problem, never a
crash or a hang."""
import pytest

from conftest import unique

HDR = {"OpenStack-API-Version": "compute 2.37"}


@pytest.fixture(scope="module")
def ctx(cloud):
    tok = cloud.token()
    image = cloud.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    return cloud, tok, image


def post_server(ctx, server=None, raw=None):
    cloud, tok, _ = ctx
    body = None if raw is not None else {"server": server}
    return cloud.request("POST", "/compute/v2.1/servers", body, token=tok, headers=HDR, raw=raw)


def good(ctx, **kw):
    s = {"name": unique("bad"), "flavorRef": "1", "imageRef": ctx[2], "networks": "none"}
    s.update(kw)
    return s


def test_malformed_json(ctx):
    st, _, body = post_server(ctx, raw="{not json")
    assert st == 400 and body["badRequest"]["code"] == 400


def test_missing_and_wrong_fields(ctx):
    s = good(ctx)
    del s["flavorRef"]
    st, _, body = post_server(ctx, s)
    assert st == 400 and "flavorRef" in body["badRequest"]["message"]
    st, _, body = post_server(ctx, good(ctx, name=12))
    assert st == 400 and "name" in body["badRequest"]["message"]
    st, _, body = post_server(ctx, good(ctx, name="x" * 256))
    assert st == 400 and "name" in body["badRequest"]["message"]
    st, _, body = post_server(ctx, good(ctx, min_count="many"))
    assert st == 400 and "min_count" in body["badRequest"]["message"]
    s = good(ctx)
    del s["networks"]
    st, _, body = post_server(ctx, s)
    assert st == 400 and "networks" in body["badRequest"]["message"]


def test_unknown_references(ctx):
    st, _, body = post_server(ctx, good(ctx, flavorRef="no-such-flavor"))
    assert st == 400 and "no-such-flavor" in body["badRequest"]["message"]
    st, _, body = post_server(ctx, good(ctx, imageRef="11111111-2222-3333-4444-555555555555"))
    assert st == 400 and body["badRequest"]["message"] == "Can not find requested image"
    st, _, body = post_server(ctx, good(ctx, imageRef="not-a-uuid"))
    assert st == 400 and "imageRef" in body["badRequest"]["message"]
    st, _, body = post_server(ctx, good(ctx, key_name="no-such-key"))
    assert st == 400 and "key_name" in body["badRequest"]["message"]


def test_not_found_ids(ctx):
    cloud, tok, _ = ctx
    for path in ("/compute/v2.1/servers/not-a-uuid", "/compute/v2.1/servers/" + "0" * 32,
                 "/compute/v2.1/flavors/nope", "/compute/v2.1/os-keypairs/nope"):
        st, _, body = cloud.request("GET", path, token=tok)
        assert st == 404 and body["itemNotFound"]["message"], path


def test_body_too_large(ctx):
    cloud, tok, _ = ctx
    st, _, _ = post_server(ctx, raw='{"server": {"name": "%s"}}' % ("x" * 200000))
    assert st == 413


def test_server_still_healthy(ctx):
    cloud, tok, image = ctx
    st, _, body = post_server(ctx, good(ctx))
    assert st == 202
    assert cloud.wait_server(body["server"]["id"])["status"] == "ACTIVE"

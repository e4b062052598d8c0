"""`sentinel projects create --synthetic`: the operator's one way to make a synthetic project (the acceptance
suite's kind), fixed at creation."""

import json

from integration.test_cli import endpoint, run  # noqa: F401  (the fixtures)


def test_projects_create_synthetic_records_it_on_the_first_fact_and_plain_stays_plain(run, endpoint) -> None:  # noqa: F811
    from sentinel_domain.ports import StreamRef
    from sentinel_runner.runtime import connect

    # When the operator creates one synthetic and one plain project
    code, out, _err = run("projects", "create", "--id", "acc", "--synthetic")
    plain_code, plain_out, _ = run("projects", "create", "--id", "shop")
    # Then both are created, and only the synthetic one says so
    assert code == 0 and json.loads(out) == {"project": "acc", "seq": 1, "synthetic": True}
    assert plain_code == 0 and json.loads(plain_out) == {"project": "shop", "seq": 1}
    # And the chains' first facts record it: true on the synthetic one, absent from the plain one
    store = connect(endpoint).gate.store
    first = {p: json.loads(store.load(StreamRef(p)).facts[1]) for p in ("acc", "shop")}
    assert first["acc"]["synthetic"] is True and "synthetic" not in first["shop"]

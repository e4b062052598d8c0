"""The fake GitHub itself: proof that its validation cannot silently pass. Requests GitHub's description does
not admit (a wrong or unknown body field, an unknown path or method, an undocumented query parameter, a
missing body), answers and webhook payloads its schemas refuse, and JWTs GitHub would refuse are each
caught; webhooks are signed as GitHub signs them."""

import hashlib
import hmac
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support import github_description
from support.fake_github import FakeGitHub, running_fake
from support.github_description import rest_description, webhook_description

REPO = "acme/shop"


@pytest.fixture
def github(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.install(5, REPO)
    return fake_github


def call(github: FakeGitHub, method: str, path: str, body: Any = None, token: str | None = None) -> int:
    """One request as Sentinel's adapter would send it (headers and a live installation token)."""
    if token is None:
        forge = github.forge(5)
        token = forge.credentials.token(forge._mint)
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(github.url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("X-GitHub-Api-Version", "2022-11-28")
    request.add_header("User-Agent", "test")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        error.close()
        return error.code


# ---- requests the description does not admit -------------------------------------------------------------


def test_a_body_field_github_does_not_declare_is_a_violation(github: FakeGitHub) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    # Given a check run body with a misspelled field (GitHub would ignore it: the conclusion never lands)
    call(
        github, "POST", f"/repos/{REPO}/check-runs", {"name": "s", "head_sha": head, "conclusions": "success"}
    )
    # Then the fake recorded it
    assert any("'conclusions' is not in GitHub's description" in v for v in github.take_violations())


def test_a_body_value_the_schema_refuses_is_a_violation(github: FakeGitHub) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    call(github, "POST", f"/repos/{REPO}/check-runs", {"name": "s", "head_sha": head, "conclusion": "passed"})
    call(
        github, "POST", f"/repos/{REPO}/check-runs", {"name": "s", "head_sha": head, "output": {"title": "t"}}
    )
    found = github.take_violations()
    assert any("'passed' is not one of" in v for v in found)
    assert any("'summary' is a required property" in v for v in found)


def test_a_missing_required_body_and_a_body_where_none_is_documented_are_violations(
    github: FakeGitHub,
) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    call(github, "POST", f"/repos/{REPO}/check-runs")
    call(github, "GET", f"/repos/{REPO}/git/commits/{head}", {"unexpected": True})
    found = github.take_violations()
    assert any("the request body is required" in v for v in found)
    assert any("GitHub documents no request body" in v for v in found)


def test_an_unknown_path_or_method_is_a_violation_and_answered_404(github: FakeGitHub) -> None:
    assert call(github, "GET", f"/repos/{REPO}/check-suns/1") == 404
    call(github, "DELETE", f"/repos/{REPO}/check-runs/1")
    found = github.take_violations()
    assert any("no path in GitHub's REST description matches" in v for v in found)
    assert any("GitHub documents no DELETE" in v for v in found)


def test_an_undocumented_query_parameter_or_a_wrongly_typed_one_is_a_violation(github: FakeGitHub) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    call(github, "GET", f"/repos/{REPO}/compare/{head}...{head}?files_per_page=1000")
    call(github, "GET", f"/repos/{REPO}/pulls/1/files?per_page=many")
    found = github.take_violations()
    assert any("query parameter 'files_per_page' is not documented" in v for v in found)
    assert any("'per_page'='many'" in v for v in found)


def test_missing_version_and_user_agent_headers_are_violations(github: FakeGitHub) -> None:
    request = urllib.request.Request(
        github.url + f"/repos/{REPO}/git/commits/{'a' * 40}", headers={"User-Agent": ""}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    refused.value.close()
    found = github.take_violations()
    assert any("X-GitHub-Api-Version" in v for v in found) and any("User-Agent" in v for v in found)


def test_an_answer_the_response_schema_refuses_is_caught() -> None:
    # Given a compare answer the fake would build, with a field GitHub documents as an enum broken
    description = rest_description()
    op, _, _ = description.match("GET", "/repos/o/r/compare/a...b")
    assert op is not None
    answer = description.response_instance(op, 200)
    assert description.check_response(op, 200, answer) == []
    answer["status"] = "sideways"
    del answer["commits"]
    # Then both faults are reported
    found = description.check_response(op, 200, answer)
    assert any("'sideways' is not one of" in v for v in found) and any(
        "'commits' is a required" in v for v in found
    )
    # And a success status the operation does not document is reported too
    assert description.check_response(op, 204, None)


def test_unclaimed_violations_fail_the_test_at_teardown() -> None:
    with pytest.raises(AssertionError, match="no path in GitHub's REST description matches"):
        with running_fake() as fake:
            fake.install(5, REPO)
            call(fake, "GET", "/nowhere")


# ---- the app's credentials -------------------------------------------------------------------------------


def test_a_jwt_github_would_refuse_gets_no_token(github: FakeGitHub) -> None:
    from datetime import timedelta

    from sentinel_service.adapters import github_auth

    forge = github.forge(5)
    key = github_auth.load_private_key(github.private_key_pem)
    # Given a JWT as the adapter makes it, then GitHub trades it for a token
    valid = github_auth.app_jwt(github.app_id, key, github.now())
    assert call(github, "POST", "/app/installations/5/access_tokens", {}, token=valid) == 201
    # And JWTs issued in the future, or living past ten minutes, get none
    future = github_auth.app_jwt(github.app_id, key, github.now() + timedelta(minutes=5))
    assert call(github, "POST", "/app/installations/5/access_tokens", {}, token=future) == 401
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(github_auth, "JWT_LIFETIME_SECONDS", 11 * 60)
        assert (
            call(github, "POST", "/app/installations/5/access_tokens", {}, token=forge.credentials.jwt())
            == 401
        )
    # And a token is needed on repository routes
    assert call(github, "GET", f"/repos/{REPO}/git/commits/{'a' * 40}", token="ghs_not_issued") == 401


def test_a_token_may_not_ask_for_more_than_the_app_was_granted(github: FakeGitHub) -> None:
    forge = github.forge(5)
    body = {"permissions": {"administration": "write"}}
    assert (
        call(github, "POST", "/app/installations/5/access_tokens", body, token=forge.credentials.jwt()) == 422
    )


# ---- webhooks --------------------------------------------------------------------------------------------


class Receiver:
    """A loopback endpoint that records what it was posted."""

    def __init__(self) -> None:
        self.received: list[tuple[Any, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((self.headers, body))
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.server.shutdown()
    made.server.server_close()


@pytest.mark.parametrize(
    ("event", "action"),
    [
        ("pull_request", "opened"),
        ("pull_request", "reopened"),
        ("pull_request", "synchronize"),
        ("merge_group", "checks_requested"),
        ("check_run", "rerequested"),
    ],
)
def test_a_delivery_is_signed_as_github_signs_it_and_its_payload_is_documented(
    github: FakeGitHub, receiver: Receiver, event: str, action: str
) -> None:
    base = github.commit(REPO, {"a.txt": "a"})
    head = github.commit(REPO, {"a.txt": "b"}, parent=base)
    # When the fake delivers the event
    delivery = github.deliver(receiver.url, event, {"action": action}, base=base, head=head, number=3)
    # Then the receiver got GitHub's headers and a body whose HMAC-SHA256 under the secret is the signature
    assert delivery.status == 202
    [(headers, body)] = receiver.received
    expected = "sha256=" + hmac.new(github.webhook_secret.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Hub-Signature-256"] == expected
    assert headers["X-GitHub-Event"] == event and headers["X-GitHub-Delivery"] == delivery.delivery_id
    assert headers["User-Agent"].startswith("GitHub-Hookshot/")
    # And the payload is the documented one, about the fake's repository, installation and commits
    payload = json.loads(body)
    assert webhook_description().check_payload(event, action, payload) == []
    assert payload["action"] == action and payload["repository"]["full_name"] == REPO
    assert payload["installation"]["id"] == 5
    if event == "pull_request":
        assert (payload["pull_request"]["head"]["sha"], payload["pull_request"]["base"]["sha"]) == (
            head,
            base,
        )
    elif event == "merge_group":
        assert (payload["merge_group"]["head_sha"], payload["merge_group"]["base_sha"]) == (head, base)
    else:
        assert payload["check_run"]["head_sha"] == head


def test_a_payload_the_webhook_schema_refuses_is_a_violation(github: FakeGitHub, receiver: Receiver) -> None:
    head = github.commit(REPO, {"a.txt": "a"})
    github.deliver(receiver.url, "pull_request", {"pull_request": {"number": "seven"}}, base=head, head=head)
    assert any("'seven' is not of type 'integer'" in v for v in github.take_violations())
    # Unless the test asks for a malformed delivery on purpose
    github.deliver(receiver.url, "pull_request", body=b"{not json", base=head, head=head)
    assert github.take_violations() == [] and receiver.received[-1][1] == b"{not json"


# ---- the descriptions must be there on CI ----------------------------------------------------------------


def test_missing_descriptions_skip_locally_and_fail_on_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(github_description, "REST_FILE", tmp_path / "absent.json")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        github_description.require_descriptions()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="make test"):
        github_description.require_descriptions()

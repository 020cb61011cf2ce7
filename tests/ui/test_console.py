"""The leaderboard and the admin console in a browser: the leaderboard
equals the API's; an admin sees an open circuit breaker and unlocks a
locked user; a non-admin gets the 403 page."""

import time

from conftest import ADMIN_EMAIL, PASSWORD, check_page
from test_ui import new_email, register_via_api, sign_in

FAILING = "mistral:mistral-large-latest"


def finished_debate(agon, agents):
    for _ in range(30):
        status, created = agon.api("POST", "/api/debates", body={"topic": "Console test", "agents": agents, "rounds": 1})
        if status != 429:
            break
        time.sleep(created["details"]["retry_after"])
    assert status == 201, created
    for _ in range(300):
        _, detail = agon.api("GET", f"/api/debates/{created['id']}")
        if detail["status"] in ("completed", "failed"):
            return
        time.sleep(0.1)
    raise AssertionError("the debate did not finish")


def open_breaker(agon):
    for _ in range(6):
        _, breakers = agon.api("GET", "/api/agents/circuit-breakers")
        if any(b["agent"] == FAILING and b["state"] == "open" for b in breakers["circuit_breakers"]):
            return
        finished_debate(agon, [FAILING, "demo-a", "demo-b"])
    raise AssertionError(f"no open breaker: {breakers}")


def admin_signed_in(agon, page):
    agon.api("POST", "/api/auth/register", token=None, body={"email": ADMIN_EMAIL, "password": PASSWORD, "name": "UI Admin"})
    sign_in(page, agon.base, ADMIN_EMAIL)
    page.get_by_role("heading", name="Start a debate").wait_for()


def test_the_leaderboard_equals_the_api(agon, watched):
    page = watched.page
    finished_debate(agon, ["demo-a", "demo-b"])
    email = new_email()
    register_via_api(agon, email)
    sign_in(page, agon.base, email)
    page.get_by_role("link", name="Leaderboard").click()
    page.get_by_role("heading", name="Leaderboard").wait_for()
    _, api = agon.api("GET", "/api/leaderboard?limit=100")
    wanted = [
        [str(a["rank"]), a["name"], f"{a['elo']:.1f}", str(a["debates"]), str(a["wins"]), str(a["losses"]), str(a["draws"]), str(a["failures"])]
        for a in api["agents"]
    ]
    shown = page.locator("#leaderboard tbody tr").evaluate_all("rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))")
    assert shown == wanted
    check_page(page, "leaderboard")


def test_an_admin_sees_an_open_breaker_and_unlocks_a_user(agon, watched):
    page, victim = watched.page, new_email()
    register_via_api(agon, victim)
    for _ in range(5):
        agon.api("POST", "/api/auth/login", token=None, body={"email": victim, "password": "not the password"})
    open_breaker(agon)

    admin_signed_in(agon, page)
    page.get_by_role("link", name="Admin").click()
    page.get_by_role("heading", name="Admin console").wait_for()
    row = page.locator("#breakers tr", has_text=FAILING)
    assert "open" in row.inner_text(), (row.inner_text(), agon.api("GET", "/api/agents/circuit-breakers"))
    check_page(page, "admin")
    assert "caught up" in page.locator("#health-summary").inner_text()
    parts = [("Health", "Health report", "admin-health"), ("Recent errors", "Recent errors", "admin-errors"),
             ("Rate limits", "Rate limits", "admin-limits"), ("Metrics", "Metrics", "admin-metrics")]
    for link, heading, shot in parts:
        page.get_by_role("link", name=link, exact=True).click()
        page.get_by_role("heading", name=heading, exact=True).wait_for()
        check_page(page, shot)

    page.get_by_role("link", name="Users").click()
    page.get_by_label("Email or name contains").fill(victim)
    page.get_by_role("button", name="Search").click()
    assert "locked" in page.locator("#users tbody").inner_text()
    check_page(page, "admin-users")
    page.get_by_role("link", name=f"Unlock {victim}").click()
    page.get_by_role("heading", name="Unlock account").wait_for()
    check_page(page, "admin-confirm")
    page.get_by_role("button", name="Unlock").click()
    page.get_by_text("The account is unlocked.").wait_for()
    status, login = agon.api("POST", "/api/auth/login", token=None, body={"email": victim, "password": PASSWORD})
    assert status == 200, login


def test_a_non_admin_gets_the_403_page(agon, watched):
    page, email = watched.page, new_email()
    register_via_api(agon, email)
    sign_in(page, agon.base, email)
    page.get_by_role("heading", name="Start a debate").wait_for()
    assert page.get_by_role("link", name="Admin").count() == 0
    response = page.goto(agon.base + "/admin")
    assert response.status == 403
    page.get_by_role("heading", name="Not allowed").wait_for()
    check_page(page, "admin-forbidden")
    for path in ["/admin/users", "/admin/health", "/admin/errors", "/admin/limits", "/admin/metrics"]:
        response = page.goto(agon.base + path)
        assert response.status == 403, path

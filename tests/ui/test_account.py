"""The account page in a browser: an API key shown once that works with a
plain HTTP client until revoked, signing out another browser's session,
and turning on two-factor authentication with a computed code."""

import re
import urllib.error
import urllib.request

from conftest import PASSWORD, check_page, totp
from test_ui import new_email, register_via_api, sign_in


def status_with(base, token):
    request = urllib.request.Request(base + "/api/auth/me")
    request.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def signed_in_account(agon, page):
    email = new_email()
    register_via_api(agon, email)
    sign_in(page, agon.base, email)
    page.get_by_role("heading", name="Start a debate").wait_for()
    page.get_by_role("link", name="Account").click()
    page.get_by_role("heading", name="Account", exact=True).wait_for()
    return email


def test_an_api_key_is_shown_once_works_and_is_refused_once_revoked(agon, watched):
    page = watched.page
    email = signed_in_account(agon, page)
    assert page.get_by_text(email).first.is_visible()
    check_page(page, "account")
    page.get_by_role("link", name="API keys", exact=True).click()
    page.get_by_role("heading", name="API keys").wait_for()
    check_page(page, "account-keys")
    page.get_by_label("New key name").fill("script <one>")
    page.get_by_role("button", name="Create API key").click()
    key = page.locator("#new-key").inner_text()
    assert re.fullmatch(r"agon_\S+", key), key
    check_page(page, "account-key-created")
    assert status_with(agon.base, key) == 200

    page.goto(agon.base + "/account/keys")
    assert page.locator("#new-key").count() == 0
    assert key not in page.content()
    page.get_by_role("link", name="Revoke script <one>").click()
    page.get_by_role("heading", name="Revoke API key").wait_for()
    check_page(page, "account-key-revoke-confirm")
    assert status_with(agon.base, key) == 200
    page.get_by_role("button", name="Revoke key").click()
    page.get_by_text("The API key was revoked").wait_for()
    assert status_with(agon.base, key) == 401

    page.get_by_role("link", name="Organization", exact=True).click()
    page.get_by_role("heading", name="Organization").wait_for()
    check_page(page, "account-organization")
    page.get_by_role("link", name="Rate limits", exact=True).click()
    page.get_by_role("heading", name="Rate limits").wait_for()
    check_page(page, "account-limits")

    # The password last: changing it signs this browser out.
    page.get_by_role("link", name="Password", exact=True).click()
    page.get_by_role("heading", name="Password").wait_for()
    check_page(page, "account-password")
    new = "a new and longer passphrase"
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password", exact=True).fill(new)
    page.get_by_label("New password again").fill(new + " but not quite")
    page.get_by_role("button", name="Change password").click()
    page.get_by_role("alert").get_by_text("The new passwords differ").wait_for()
    check_page(page, "account-password-refused")
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password", exact=True).fill(new)
    page.get_by_label("New password again").fill(new)
    page.get_by_role("button", name="Change password").click()
    page.get_by_text("every session signed out").wait_for()
    sign_in(page, agon.base, email, password=new)
    page.get_by_role("heading", name="Start a debate").wait_for()


def test_signing_out_other_sessions_signs_out_another_browser(agon, browser, watched):
    page = watched.page
    email = signed_in_account(agon, page)
    other = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        second = other.new_page()
        sign_in(second, agon.base, email)
        second.get_by_role("heading", name="Start a debate").wait_for()

        page.get_by_role("link", name="Sessions", exact=True).click()
        page.get_by_role("heading", name="Sessions").wait_for()
        check_page(page, "account-sessions")
        page.get_by_role("link", name="Sign out every other session").click()
        check_page(page, "account-sessions-confirm")
        page.get_by_role("button", name="Sign out other sessions").click()
        page.get_by_text("Every other session was signed out.").wait_for()
        check_page(page, "account-sessions-revoked")

        second.goto(agon.base + "/account")
        assert "/login?next=%2Faccount" in second.url
    finally:
        other.close()


def test_mfa_is_turned_on_with_a_computed_code(agon, watched):
    page = watched.page
    signed_in_account(agon, page)
    page.get_by_role("button", name="Set up two-factor authentication").click()
    page.get_by_role("img", name="QR code of the authenticator secret").wait_for()
    secret = page.locator("#totp-secret").inner_text()
    check_page(page, "account-mfa-setup")
    page.get_by_label("Code from the app").fill(totp(secret))
    page.get_by_role("button", name="Turn on").click()
    page.get_by_text("Two-factor authentication is on.").wait_for()
    assert page.locator("#backup-codes li").count() == 10
    check_page(page, "account-mfa-backup-codes")
    page.get_by_role("link", name="Back to your account").click()
    assert page.locator("#mfa-state").inner_text() == "on"


def test_the_developer_portal(agon, watched):
    page = watched.page
    signed_in_account(agon, page)
    page.get_by_role("link", name="Developer").click()
    page.get_by_role("heading", name="Developer portal").wait_for()
    assert page.locator("#server").inner_text().startswith("http")
    # One client's sample open at a time: opening the SDK's closes curl's.
    curl = page.get_by_text("curl -X POST")
    assert curl.is_visible()
    page.locator("summary", has_text="Python (aragora-sdk)").focus()
    page.keyboard.press("Enter")
    page.get_by_text("from aragora_sdk import AragoraClient").wait_for()
    assert not curl.is_visible()
    check_page(page, "developer")
    page.get_by_role("link", name="WebSocket messages").click()
    page.locator("summary", has_text="agent.delta").click()
    check_page(page, "developer-events")

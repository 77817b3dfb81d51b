"""The web demo (`ticks serve --demo`) in a real browser: Debian's chromium and
chromedriver, driven by Selenium, against the real binary.

Each browser is one person. Every step saves a screenshot under
TICKS_ARTIFACTS (default .build/artifacts/browser), named test-step.png.
"""

import json
import os
import re
import secrets
import shutil
import signal
import urllib.error
import urllib.request

import pytest
from conftest import TicksProcess
from wire import Ticks

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
ARTIFACTS = os.environ.get("TICKS_ARTIFACTS", os.path.join(os.getcwd(), ".build", "artifacts", "browser"))
WAIT_SECONDS = 15

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER) and not os.environ.get("CI"),
    reason="chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")


@pytest.fixture(scope="module", autouse=True)
def fresh_artifacts():
    """Screenshots of an earlier run would mislead: remove them."""
    if os.path.isdir(ARTIFACTS):
        for name in os.listdir(ARTIFACTS):
            if name.startswith("test-") and name.endswith(".png"):
                os.remove(os.path.join(ARTIFACTS, name))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One demo server for the tests that do not stop it."""
    server = TicksProcess(tmp_path_factory.mktemp("demo"), api_key="demokey", api_secret=secrets.token_urlsafe(48),
                          extra_args=["--demo"])
    yield server
    assert server.stop() == 0, server.output()


@pytest.fixture
def browsers(request):
    """Opens browsers (one per person) and closes them after the test."""
    assert CHROMIUM and CHROMEDRIVER, "CI must run the browser tests: install chromium and chromium-driver"
    opened = []

    def open_browser(base_url, person, width=1100, height=760):
        browser = Browser(base_url, person, request.node.name, width, height)
        opened.append(browser)
        return browser

    yield open_browser
    for browser in opened:
        browser.quit()


def stream(server):
    return Ticks(server.base_url, server.api_key, server.api_secret)


class Browser:
    """One person's browser window on the demo page."""

    def __init__(self, base_url, person, test_name, width, height):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                         f"--window-size={width},{height}", "--lang=en-GB"):
            options.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        if width < 500:
            # A window cannot be that narrow: emulate a phone's screen instead.
            self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                "width": width, "height": height, "deviceScaleFactor": 1, "mobile": True})
        self.person = person
        self.test_name = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")
        self.steps = 0
        self.driver.get(base_url + "/")

    def quit(self):
        self.driver.quit()

    # Finding and waiting

    def find(self, css):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait(self, condition, what):
        from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, WAIT_SECONDS, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda _: condition())
        except TimeoutException:
            self.shot("timeout")
            raise AssertionError(f"{self.person}: timed out waiting for {what}") from None

    def shot(self, step):
        """Saves a screenshot of this step as a test artifact."""
        os.makedirs(ARTIFACTS, exist_ok=True)
        self.steps += 1
        path = os.path.join(ARTIFACTS, f"{self.test_name}-{self.person}-{self.steps:02d}-{step}.png")
        self.driver.save_screenshot(path)
        return path

    # What a person does

    def sign_in(self, user_id, name=""):
        self.wait(lambda: self.find("#sign-in").is_displayed(), "the sign-in form")
        self.find("#sign-in-id").send_keys(user_id)
        if name:
            self.find("#sign-in-name").send_keys(name)
        self.find("#sign-in-form button[type=submit]").click()
        self.wait(lambda: self.find("#connection").get_attribute("data-state") == "connected", "the connection")

    def sign_out(self):
        self.find("#sign-out").click()
        self.wait(lambda: self.find("#sign-in").is_displayed(), "the sign-in form")

    def create_channel(self, name, members, channel_type="messaging"):
        from selenium.webdriver.support.ui import Select

        self.find("#new-channel summary").click()
        self.find("#new-channel-name").send_keys(name)
        self.find("#new-channel-members").send_keys(" ".join(members))
        self.wait(lambda: channel_type in [o.get_attribute("value") for o in self.find_all("#new-channel-type option")],
                  f"channel type {channel_type}")
        Select(self.find("#new-channel-type")).select_by_value(channel_type)
        self.find("#new-channel-form button[type=submit]").click()
        self.wait(lambda: self.find("#channel-title").text == name, f"channel {name} to open")

    def item_with_text(self, items_css, text_css, text):
        """The first of `items_css` whose `text_css` part reads `text`, or None."""
        for item in self.find_all(items_css):
            if item.find_element("css selector", text_css).text == text:
                return item
        return None

    def channel_button(self, name):
        return self.item_with_text("#channel-list button", ".name", name)

    def open_channel(self, name):
        # A click on a button that an event has just redrawn is stale: the wait tries again.
        def click():
            button = self.channel_button(name)
            return button is not None and (button.click() or True)

        self.wait(click, f"channel {name} in the list")
        self.wait(lambda: self.find("#channel-title").text == name, f"channel {name} to open")

    def send(self, text):
        box = self.find("#composer-text")
        box.send_keys(text)
        self.find("#composer button[type=submit]").click()

    def message(self, text):
        return self.item_with_text("#messages li.message", ".text", text)

    def indicator(self, text):
        item = self.message(text)
        found = item.find_elements("css selector", ".indicator") if item else []
        return found[0] if found else None

    def look(self, text):
        """The indicator of the message `text` as one snapshot: events redraw it, and an element found
        earlier goes stale (a look that meets a redraw is taken again)."""
        seen = {}

        def take():
            indicator = self.indicator(text)
            if indicator is None:
                return False
            parts = {key: [e.text for e in indicator.find_elements("css selector", selector)]
                     for key, selector in (("avatars", ".avatar"), ("more", ".more"), ("everyone_text", ".everyone"),
                                           ("count", ".count"))}
            seen.clear()
            seen.update(status=indicator.get_attribute("data-status"), label=indicator.get_attribute("aria-label"),
                        read_count=indicator.get_attribute("data-read-count"),
                        everyone=indicator.get_attribute("data-everyone"), **parts)
            return True

        self.wait(take, f"'{text}''s indicator")
        return seen

    def wait_status(self, text, status, read_count=None):
        def reached():
            indicator = self.indicator(text)
            if indicator is None or indicator.get_attribute("data-status") != status:
                return False
            return read_count is None or indicator.get_attribute("data-read-count") == str(read_count)

        self.wait(reached, f"'{text}' to be {status}" + (f" by {read_count}" if read_count is not None else ""))
        return self.indicator(text)

    def status(self, text):
        indicator = self.indicator(text)
        return indicator.get_attribute("data-status") if indicator else None

    def messages_shown(self):
        """Every message item of the open channel in order, as (id, text, status, read count, tick colour);
        one script rather than a round trip per item, for long histories."""
        return [tuple(row) for row in self.driver.execute_script("""
            return [...document.querySelectorAll('#messages li.message')].map((item) => {
              const indicator = item.querySelector('.indicator');
              return [item.dataset.key, item.querySelector('.text').textContent,
                      indicator ? indicator.dataset.status : null, indicator ? indicator.dataset.readCount : null,
                      indicator ? getComputedStyle(indicator).color : null];
            });""")]

    def offset_in_list(self, message_id, scroll_to=None):
        """How far below the top of the message list's visible area a message is, in pixels; first
        scrolled to `scroll_to` if given, in the same script (before the page can react to it)."""
        return self.driver.execute_script("""
            const list = document.getElementById('messages');
            if (arguments[1] !== null) list.scrollTop = arguments[1];
            const item = list.querySelector(`[data-key="${CSS.escape(arguments[0])}"]`);
            return item.getBoundingClientRect().top - list.getBoundingClientRect().top;""", message_id, scroll_to)

    def click_load_older(self):
        """Clicks "Load older messages" where it is: a WebDriver click would first scroll the list to its
        top, which loads the page by itself."""
        button = self.find("#load-older")
        assert button.is_displayed() and button.text == "Load older messages"
        self.driver.execute_script("arguments[0].click()", button)


# MARK: Two people


def test_two_people_watch_a_message_go_sent_delivered_read(demo, browsers):
    bob = browsers(demo.base_url, "bob")
    bob.sign_in("bob", "Bob Brown")
    bob.sign_out()  # bob's phone is off: nobody can receive yet

    alice = browsers(demo.base_url, "alice")
    alice.sign_in("alice", "Alice Adams")
    alice.shot("signed-in")
    alice.create_channel("Lunch", ["bob"])
    alice.send("Pizza at noon?")
    sent = alice.wait_status("Pizza at noon?", "sent", read_count=0)
    assert sent.get_attribute("aria-label") == "Sent"
    alice.shot("sent")

    # bob's phone comes back: the page marks the message delivered when it arrives.
    bob.find("#recent-users button[data-user-id='bob']").click()
    bob.wait(lambda: bob.channel_button("Lunch") is not None, "Lunch in bob's list")
    badge = bob.channel_button("Lunch").find_element("css selector", ".unread")
    assert badge.text == "1" and badge.get_attribute("aria-label") == "1 unread"
    bob.shot("unread")
    delivered = alice.wait_status("Pizza at noon?", "delivered", read_count=0)
    assert delivered.get_attribute("aria-label") == "Delivered"
    alice.shot("delivered")

    # bob opens the channel: read.
    bob.open_channel("Lunch")
    bob.wait(lambda: not bob.channel_button("Lunch").find_elements("css selector", ".unread"), "bob's badge to go")
    bob.shot("opened")
    read = alice.wait_status("Pizza at noon?", "read", read_count=1)
    assert read.get_attribute("aria-label") == "Read"  # two people: no count, no avatars
    assert not read.find_elements("css selector", ".count, .avatar")
    alice.shot("read")

    # The receipts sheet: bob, with the exact time he read it.
    read.click()
    alice.wait(lambda: alice.find("#read-by li[data-user-id='bob'] time"), "bob in Read by")
    time = alice.find("#read-by li[data-user-id='bob'] time")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", time.get_attribute("datetime"))
    assert re.search(r"\d\d:\d\d:\d\d\.\d{3}", time.text), time.text
    assert alice.find("#delivered-to li").text == "Nobody else"  # bob read it, so he is under Read by
    alice.shot("receipts")

    # bob's answer comes the other way.
    bob.send("Yes!")
    bob.wait_status("Yes!", "read", read_count=1)  # alice has the channel open at the bottom
    assert alice.message("Yes!") is not None
    bob.shot("answered")


def test_a_group_shows_the_read_count_and_the_last_readers(demo, browsers):
    api = stream(demo)
    api.upsert_users({"id": "dora", "name": "Dora"}, {"id": "erik", "name": "Erik"},
                     {"id": "finn", "name": "Finn", "privacy_settings": {"read_receipts": {"enabled": False}}})
    people = {}
    for user_id, name in [("carol", "Carol"), ("dan", "Dan")]:
        people[user_id] = browsers(demo.base_url, user_id)
        people[user_id].sign_in(user_id, name)
    amy = browsers(demo.base_url, "amy")
    amy.sign_in("amy", "Amy")
    amy.create_channel("Trip", ["carol", "dan", "dora", "erik", "finn"], channel_type="team")
    amy.send("Who is in?")
    amy.wait_status("Who is in?", "delivered", read_count=0)  # carol's and dan's pages received it
    amy.shot("delivered")

    people["carol"].open_channel("Trip")
    amy.wait_status("Who is in?", "read", read_count=1)
    assert amy.look("Who is in?")["label"] == "Read by 1"
    amy.shot("read-by-1")

    people["dan"].open_channel("Trip")
    amy.wait_status("Who is in?", "read", read_count=2)
    shown = amy.look("Who is in?")
    assert (shown["label"], shown["count"]) == ("Read by 2", ["2"])
    amy.shot("read-by-2")

    # Two more readers through the API: four readers, three avatars "and 1 more".
    cid = "team:" + amy.find("#conversation").get_attribute("data-cid").split(":", 1)[1]
    api.mark_read(cid, "dora")
    api.mark_read(cid, "erik")
    amy.wait_status("Who is in?", "read", read_count=4)
    shown = amy.look("Who is in?")
    assert (shown["label"], shown["avatars"], shown["more"]) == ("Read by 4", ["ER", "DO", "DA"], ["and 1 more"])
    assert shown["everyone"] == "false", "finn has neither read nor received it"
    amy.shot("read-by-4")

    # finn reads privately (R10), and his answer must not make him a reader either; but the read
    # delivered it, and through his delivery he counts for "read by everyone" (R13): blue for all six.
    api.mark_read(cid, "finn")
    api.send_message(cid, "finn", "Me too", message_id="finn-1")
    amy.wait(lambda: amy.message("Me too") is not None, "finn's answer")
    amy.wait(lambda: amy.look("Who is in?")["everyone"] == "true", "read by everyone")
    shown = amy.look("Who is in?")
    assert (shown["read_count"], shown["label"], shown["everyone_text"]) == ("4", "Read by everyone", ["everyone"])
    amy.shot("private-reader-answered-read-by-everyone")

    amy.indicator("Who is in?").click()
    amy.wait(lambda: len(amy.find_all("#read-by li[data-user-id]")) == 4, "four readers in the sheet")
    assert [li.get_attribute("data-user-id") for li in amy.find_all("#read-by li[data-user-id]")] == [
        "erik", "dora", "dan", "carol"]
    amy.shot("receipts")


def test_a_played_voice_note(demo, browsers):
    """R14: amy sends a voice note; ben presses play, and amy's message shows it played — by one,
    then, once carl played it too (through the API), by two. A private player never shows."""
    api = stream(demo)
    api.upsert_users({"id": "carl", "name": "Carl"},
                     {"id": "pia", "name": "Pia", "privacy_settings": {"read_receipts": {"enabled": False}}})
    ben = browsers(demo.base_url, "ben")
    ben.sign_in("ben", "Ben")
    amy = browsers(demo.base_url, "amy-v")
    amy.sign_in("amy-v", "Amy")
    amy.create_channel("Voice", ["ben", "carl", "pia"])
    amy.find("#send-voice").click()

    def voice_note(browser):
        """The voice note as one snapshot (events redraw it: elements found earlier go stale)."""
        return browser.driver.execute_script("""
            const item = document.querySelector('#messages li.message[data-played]');
            if (!item) return null;
            const played = item.querySelector('.played');
            const play = item.querySelector('button.play');
            return {id: item.dataset.key, played: item.dataset.played,
                    count: item.querySelector('.voice').dataset.playedCount,
                    kind: item.querySelector('.voice-kind').textContent,
                    play: play ? play.getAttribute('aria-label') : null,
                    text: played ? played.textContent : null, label: played ? played.getAttribute('aria-label') : null,
                    status: item.querySelector('.indicator')?.dataset.status ?? null};""")

    # Sent, then delivered by ben's open page: the redraws settle.
    amy.wait(lambda: (voice_note(amy) or {}).get("status") == "delivered", "amy's voice note delivered")
    mine = voice_note(amy)
    assert (mine["played"], mine["kind"], mine["play"], mine["text"]) == ("false", "Voice note", None, None), \
        "the author does not play her own"
    amy.shot("voice-note-sent")

    ben.open_channel("Voice")
    ben.wait(lambda: (voice_note(ben) or {}).get("play") == "Play voice note", "the Play button on ben's page")
    ben.driver.execute_script("document.querySelector('#messages li.message[data-played] button.play').click()")
    ben.wait(lambda: voice_note(ben)["played"] == "true", "ben's own play shown")
    assert voice_note(ben)["play"] is None
    ben.shot("played")

    amy.wait(lambda: voice_note(amy)["played"] == "true", "amy sees it played")
    played = voice_note(amy)
    assert (played["text"], played["label"]) == ("▶ played 1", "Played by 1")
    amy.shot("played-by-1")

    message_id = played["id"]
    api.call("POST", f"/messages/{message_id}/played", {"user_id": "pia"})  # private: amy never hears it
    api.call("POST", f"/messages/{message_id}/played", {"user_id": "carl"})
    amy.wait(lambda: voice_note(amy)["count"] == "2", "played by two")
    played = voice_note(amy)
    assert (played["text"], played["label"]) == ("▶ played 2", "Played by 2")
    receipts = api.receipts(message_id, token=api.user_token("amy-v"))
    assert receipts["played_count"] == 2
    amy.shot("played-by-2")


def test_edited_deleted_and_threaded_messages_keep_their_receipts(demo, browsers):
    api = stream(demo)
    gus = browsers(demo.base_url, "gus")
    gus.sign_in("gus", "Gus")
    hal = browsers(demo.base_url, "hal")
    hal.sign_in("hal", "Hal")
    gus.create_channel("Plans", ["hal"])
    gus.send("Lunch at noon?")
    gus.send("Or at one")
    hal.open_channel("Plans")
    gus.wait_status("Lunch at noon?", "read")
    gus.wait_status("Or at one", "read")
    cid = gus.find("#conversation").get_attribute("data-cid")
    ids = {m["text"]: m["id"] for m in api.query_channel(cid)["messages"]}

    # An edit shows on both pages; the indicator stays read.
    api.call("PUT", f"/messages/{ids['Lunch at noon?']}", {"set": {"text": "Lunch at half past twelve?"}, "user": {"id": "gus"}})
    for page in (gus, hal):
        page.wait(lambda page=page: page.message("Lunch at half past twelve?") is not None, "the edit")
        item = page.message("Lunch at half past twelve?")
        assert item.get_attribute("data-state") == "edited"
        assert item.find_element("css selector", ".edited").text == "edited"
    assert gus.status("Lunch at half past twelve?") == "read"
    gus.shot("edited-still-read")

    # A delete shows as deleted on both pages; the sender's indicator stays as it was.
    api.call("DELETE", f"/messages/{ids['Or at one']}")
    for page in (gus, hal):
        page.wait(lambda page=page: page.message("This message was deleted") is not None, "the delete")
        assert page.message("This message was deleted").get_attribute("data-state") == "deleted"
    assert gus.status("This message was deleted") == "read"
    gus.shot("deleted")

    # A reply in the thread shows as the parent's reply count, not as a message of the channel;
    # hal reading the thread does not move the channel's indicator.
    api.call("POST", f"/channels/{cid.replace(':', '/')}/message",
             {"message": {"id": "plans-r1", "text": "Works for me", "parent_id": ids["Lunch at noon?"], "user": {"id": "hal"}}})
    gus.wait(lambda: gus.message("Lunch at half past twelve?").find_elements("css selector", ".replies"), "the reply count")
    replies = gus.message("Lunch at half past twelve?").find_element("css selector", ".replies")
    assert replies.get_attribute("data-reply-count") == "1" and replies.text == "1 reply"
    assert gus.message("Works for me") is None
    api.call("POST", f"/channels/{cid.replace(':', '/')}/read", {"thread_id": ids["Lunch at noon?"], "user": {"id": "gus"}})
    assert gus.status("Lunch at half past twelve?") == "read"
    gus.shot("thread")


def test_a_reader_who_turns_read_receipts_off_is_never_shown_as_a_reader(demo, browsers):
    nia = browsers(demo.base_url, "nia")
    nia.sign_in("nia", "Nia")
    oto = browsers(demo.base_url, "oto")
    oto.sign_in("oto", "Oto")
    toggle = oto.find("#share-reads")
    assert toggle.is_selected()
    toggle.click()  # R10: private reads
    oto.wait(lambda: stream(demo).query_users({"id": {"$in": ["oto"]}})["users"][0]
             .get("privacy_settings", {}).get("read_receipts", {}).get("enabled") is False, "oto's setting stored")
    nia.create_channel("Secret", ["oto"])
    nia.send("did you see this?")
    nia.wait_status("did you see this?", "delivered")
    oto.open_channel("Secret")
    # oto has read it: his own unread badge is gone, but nia's tick stays grey.
    oto.wait(lambda: not oto.channel_button("Secret").find_elements("css selector", ".unread"), "oto's badge to go")
    oto.shot("read-privately")
    oto.send("maybe")
    nia.wait(lambda: nia.message("maybe") is not None, "oto's answer")
    assert nia.status("did you see this?") == "delivered"
    nia.shot("still-delivered")
    # Signing in again keeps the setting.
    oto.sign_out()
    oto.find("#recent-users button[data-user-id='oto']").click()
    oto.wait(lambda: oto.find("#connection").get_attribute("data-state") == "connected", "oto back")
    assert not oto.find("#share-reads").is_selected()


# MARK: Channel types without receipts


def test_read_events_off_hides_the_indicator_and_delivery_events_off_skips_delivered(demo, browsers):
    api = stream(demo)
    api.call("POST", "/channeltypes", {"name": "quiet", "read_events": True, "delivery_events": False})
    gil = browsers(demo.base_url, "gil")
    gil.sign_in("gil", "Gil")
    fay = browsers(demo.base_url, "fay")
    fay.sign_in("fay", "Fay")

    # livestream: read_events off (R8): no indicator at all.
    fay.create_channel("Stage", ["gil"], channel_type="livestream")
    fay.send("Welcome")
    fay.wait(lambda: fay.message("Welcome") is not None and
             fay.message("Welcome").find_elements("css selector", ".meta time"), "the stored message")
    gil.open_channel("Stage")
    gil.wait(lambda: gil.message("Welcome") is not None, "gil to see Welcome")
    assert fay.indicator("Welcome") is None
    fay.shot("livestream-no-indicator")

    # quiet: delivery_events off (R9): gil's page has it but fay never sees delivered.
    fay.create_channel("Quiet", ["gil"], channel_type="quiet")
    fay.send("Psst")
    fay.wait_status("Psst", "sent")
    gil.wait(lambda: gil.channel_button("Quiet") is not None, "Quiet in gil's list")
    gil.wait(lambda: gil.channel_button("Quiet").find_elements("css selector", ".unread"), "gil's unread badge")
    assert fay.status("Psst") == "sent"
    fay.shot("quiet-sent-not-delivered")
    gil.open_channel("Quiet")
    indicator = fay.wait_status("Psst", "read", read_count=1)
    indicator.click()
    fay.wait(lambda: fay.find("#read-by li[data-user-id='gil']"), "gil in Read by")
    assert not fay.find("#delivered-section").is_displayed()
    fay.shot("quiet-receipts")


# MARK: Older messages


def demo_message_page(server):
    """ticks-demo.js's MESSAGE_PAGE: how many messages a channel opens with, and each older page has."""
    with urllib.request.urlopen(server.base_url + "/ticks-demo.js", timeout=5) as response:
        return int(re.search(r"const MESSAGE_PAGE = (\d+);", response.read().decode()).group(1))


BLUE_TICK = "rgb(11, 132, 216)"  # --blue-tick in ticks-demo.css


def test_older_pages_load_at_the_top_and_show_their_own_receipts(demo, browsers):
    page = demo_message_page(demo)
    total = 2 * page + 5  # the newest page, a full older page, and 5 more
    first_of_newest = total - page
    # sam has read up to an older message and received further, both before the newest page; all his
    # own messages come before his read cursor (his answer would make him a reader of all before it, R4).
    read_upto, delivered_upto = page * 3 // 5, page * 9 // 10
    assert read_upto < delivered_upto < first_of_newest
    sams = set(range(0, read_upto, 7))
    api = stream(demo)
    api.upsert_users({"id": "rae", "name": "Rae"}, {"id": "sam", "name": "Sam"})
    cid = f"messaging:history-{secrets.token_hex(3)}"
    api.create_channel(cid, ["rae", "sam"], "rae", name="History")
    ids = [f"h{secrets.token_hex(3)}-{index:03d}" for index in range(total)]
    for index, message_id in enumerate(ids):
        api.send_message(cid, "sam" if index in sams else "rae", f"line {index:03d}", message_id=message_id)
    api.mark_delivered("sam", (cid, ids[delivered_upto]))
    api.mark_read(cid, "sam", message_id=ids[read_upto])

    def expected(first, read_upto=read_upto, delivered_upto=delivered_upto):
        """The rows from message `first` to the newest: each once, in order, with its indicator."""
        def status(index):
            if index in sams:
                return None
            return "read" if index <= read_upto else "delivered" if index <= delivered_upto else "sent"
        return [(ids[index], f"line {index:03d}", status(index)) for index in range(first, total)]

    def shown(browser):
        rows = browser.messages_shown()
        for message_id, _, status, read_count, colour in rows:
            # Blue ticks exactly when read, by the one other member; a read tick is a double tick.
            assert (colour == BLUE_TICK) == (status == "read"), (message_id, status, colour)
            assert status != "read" or read_count == "1", (message_id, read_count)
        return [row[:3] for row in rows]

    rae = browsers(demo.base_url, "rae")
    rae.sign_in("rae", "Rae")
    rae.open_channel("History")
    rae.wait(lambda: len(rae.find_all("#messages li.message")) == page, "the newest page")
    # sam's cursors point before the newest page: none of it has reached him.
    assert shown(rae) == expected(first_of_newest)
    assert rae.find("#load-older").text == "Load older messages"
    rae.shot("newest-page")

    # Scrolled to the top, the page before loads; the message that was at the top stays where it was.
    top = rae.offset_in_list(ids[first_of_newest], scroll_to=0)
    rae.shot("scrolled-to-the-top")
    rae.wait(lambda: len(rae.find_all("#messages li.message")) == 2 * page, "the page before")
    rae.wait(lambda: not rae.find_all(".history[data-state='loading']"), "the page to be drawn")
    assert abs(rae.offset_in_list(ids[first_of_newest]) - top) <= 2, "the list jumped"
    assert rae.driver.execute_script("return document.getElementById('messages').scrollTop") > 0
    assert shown(rae) == expected(first_of_newest - page)
    rae.shot("older-page-kept-in-place")

    # The button loads the rest: fewer than a page, so the list says the conversation begins there.
    rae.click_load_older()
    rae.wait(lambda: rae.find_all(".history[data-state='beginning']"), "the beginning of the conversation")
    assert rae.find(".history").text == "Beginning of the conversation"
    assert not rae.find_all("#load-older")
    rows = shown(rae)
    assert len(rows) == total and len({row[0] for row in rows}) == total
    assert rows == expected(0)
    assert rows[read_upto][2] == "read" and rows[read_upto + 1][2] == "delivered"
    assert rows[delivered_upto][2] == "delivered" and rows[delivered_upto + 1][2] == "sent"
    rae.driver.execute_script("document.getElementById('messages').scrollTop = 0")
    rae.shot("beginning")
    rae.driver.execute_script(
        "document.querySelector(`[data-key='${arguments[0]}']`).scrollIntoView({block: 'center'})", ids[read_upto])
    rae.shot("read-then-delivered")

    # sam reads further: the event moves his cursor to a message of an older page.
    read_later = delivered_upto + 5
    api.mark_read(cid, "sam", message_id=ids[read_later])
    rae.wait(lambda: shown(rae)[read_later][2] == "read", "the older message to be read")
    assert shown(rae) == expected(0, read_upto=read_later, delivered_upto=read_later)

    # rae marks unread on another device: the page reloads the channel, back to its newest page, and
    # paging again gives the same history, once each, with the reloaded cursors.
    rae.driver.execute_script("const list = document.getElementById('messages'); list.scrollTop = list.scrollHeight")
    api.call("POST", f"/channels/{cid.replace(':', '/')}/unread",
             {"message_id": ids[first_of_newest + 10], "user": {"id": "rae"}})
    rae.wait(lambda: len(rae.find_all("#messages li.message")) == page, "the reload to the newest page")
    assert shown(rae) == expected(first_of_newest, read_upto=read_later, delivered_upto=read_later)
    for pages in (2, 3):
        rae.click_load_older()
        rae.wait(lambda: len(rae.find_all("#messages li.message")) == min(total, pages * page),
                 f"{pages} pages after the reload")
    rae.wait(lambda: rae.find_all(".history[data-state='beginning']"), "the beginning again")
    assert shown(rae) == expected(0, read_upto=read_later, delivered_upto=read_later)
    rae.shot("paged-again-after-reload")


def test_a_page_of_older_messages_takes_in_the_read_states_it_came_with(demo, browsers):
    """The page's own model (channel-model.js, as served) given answers that race with events: the read
    states of a page's answer are current, but an event may have moved a cursor further meanwhile."""
    page = browsers(demo.base_url, "model")
    results = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/channel-model.js').then(({ ChannelModel, indicatorFor }) => {
          const at = (index) => new Date(Date.UTC(2026, 0, 1, 0, 0, index)).toISOString();
          const message = (index) => ({ id: `m${index}`, text: `m${index}`, created_at: at(index),
                                        user: { id: index === 0 ? 'sam' : 'rae' } });
          const read = (user, readID, deliveredID, when, unread = 0) => ({
            user: { id: user }, last_read_message_id: readID, last_read: when,
            last_delivered_message_id: deliveredID, last_delivered_at: when, unread_messages: unread });
          const all = [...Array(10).keys()].map(message);
          // The newest page is m6-m9; sam has read m2 and received m4, both older than it.
          const channel = new ChannelModel({
            channel: { cid: 'messaging:model', config: {}, member_count: 2 }, messages: all.slice(6),
            read: [read('rae', 'm9', 'm9', at(20)), read('sam', 'm2', 'm4', at(20))] }, 4);
          const statuses = () => channel.messages.map((m) => indicatorFor(channel, m, 'rae')?.status ?? null);
          const results = { newest: statuses(), beginning: channel.beginningLoaded };
          // The page m3-m6 (m6 again) comes with sam's current read state: read m3, received m5.
          results.added = channel.addOlder(all.slice(3, 7), [read('rae', 'm9', 'm9', at(20)),
                                                            read('sam', 'm3', 'm5', at(21))],
                                           { complete: false, me: 'rae' });
          results.afterPage = statuses();
          // An event moves sam's read to m7; a page answered before it says m3: the event stays.
          channel.moveCursor({ id: 'sam' }, 'read', 'm7', at(22));
          channel.addOlder(all.slice(0, 3), [read('sam', 'm3', 'm5', at(21)),
                                             read('rae', 'm1', 'm9', at(23), 8)], { complete: true, me: 'rae' });
          results.afterBeginning = statuses();
          results.ids = channel.messages.map((m) => m.id);
          results.beginning2 = channel.beginningLoaded;
          // rae marked unread from m2 elsewhere (a later move of her own read cursor back): taken.
          results.own = [channel.reads.get('rae').last_read_message_id, channel.unreadCount('rae')];
          done(results);
        }).catch((error) => done({ error: String(error) }));
    """)
    assert "error" not in results, results
    assert results["newest"] == ["sent"] * 4 and results["beginning"] is False
    assert results["added"] == 3  # m6 was loaded already
    assert results["afterPage"] == ["read", "delivered", "delivered", "sent", "sent", "sent", "sent"]
    assert results["ids"] == [f"m{index}" for index in range(10)]
    assert results["afterBeginning"] == [None] + ["read"] * 7 + ["sent"] * 2
    assert results["beginning2"] is True
    assert results["own"] == ["m1", 8]


def test_a_reload_answered_before_a_send_does_not_take_the_sent_message_away(demo, browsers):
    """The page's own model given a reload's answer that the server wrote before a message was sent,
    arriving after the send's answer and the events about it (a server paused and resumed, a busy
    machine): the message, and the cursors and "read by all" that moved onto it, stay. A truncation
    or a reader who hid their reads meanwhile still wins, and a message the page had before it asked
    that the answer lacks (deleted hard meanwhile) goes."""
    page = browsers(demo.base_url, "model")
    results = page.driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/channel-model.js').then(({ ChannelModel, indicatorFor, arrivalsSoFar }) => {
          const at = (index) => new Date(Date.UTC(2026, 0, 1, 0, 0, index)).toISOString();
          const message = (index) => ({ id: `m${index}`, text: `m${index}`, created_at: at(index),
                                        user: { id: 'rae' } });
          const read = (user, readID, when, unread = 0) => ({
            user: { id: user }, last_read_message_id: readID, last_read: when,
            last_delivered_message_id: readID, last_delivered_at: when, unread_messages: unread });
          const channel = { cid: 'messaging:late', config: {}, member_count: 2 };
          // What the server wrote before m3 was sent: m0-m2, sam has read m2.
          const before = { channel, messages: [0, 1, 2].map(message),
                           read: [read('rae', 'm2', at(2)), read('sam', 'm2', at(2))], read_by_all_up_to: 'm2' };
          const model = new ChannelModel(before, 25);
          const statuses = () => model.messages.map((m) => [m.id, indicatorFor(model, m, 'rae')?.status ?? null]);
          // The page asks for a reload; m3's send answers, sam reads it (an event), then the late answer comes.
          const asked = arrivalsSoFar();
          model.add(message(3), 'rae');
          model.moveCursor({ id: 'sam' }, 'read', 'm3', at(4));
          model.readByAllUpTo = 'm3';
          model.load(before, 25, asked);
          const results = { late: statuses(), readByAll: model.readByAllUpTo, beginning: model.beginningLoaded,
                            sam: model.reads.get('sam').last_read_message_id };
          // A reload asked for now, written after sam hid their reads: m3 was there before it was asked
          // for and the answer has it; sam's read state is not shown again.
          const withM3 = [0, 1, 2, 3].map(message);
          model.load({ channel, messages: withM3, read: [read('rae', 'm3', at(3))] }, 25, arrivalsSoFar());
          results.hidden = [statuses(), model.reads.has('sam')];
          // m4 arrives; a reload asked for after it lacks it (deleted hard meanwhile): it goes.
          model.add(message(4), 'rae');
          model.load({ channel, messages: withM3, read: [read('rae', 'm3', at(3))] }, 25, arrivalsSoFar());
          results.deleted = model.messages.map((m) => m.id);
          // m5 arrives after a reload was asked for that the channel's truncation answers: nothing stays.
          const truncating = arrivalsSoFar();
          model.add(message(5), 'rae');
          model.load({ channel: { ...channel, truncated_at: at(6) }, messages: [], read: [] }, 25, truncating);
          results.truncated = statuses();
          done(results);
        }).catch((error) => done({ error: String(error) }));
    """)
    assert "error" not in results, results
    assert results["late"] == [["m0", "read"], ["m1", "read"], ["m2", "read"], ["m3", "read"]]
    assert results["sam"] == "m3" and results["readByAll"] == "m3" and results["beginning"] is True
    assert results["hidden"] == [[["m0", "sent"], ["m1", "sent"], ["m2", "sent"], ["m3", "sent"]], False]
    assert results["deleted"] == ["m0", "m1", "m2", "m3"]
    assert results["truncated"] == []


# MARK: The status rule, one table with Swift


STATUS_CASES = os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "Fixtures", "receipt-status-cases.json")

# Each case as a channel of messages m1…mN, where a cursor at seq s names m{s} (0 names none). The
# sender's own read state is there too, past every message, as the server sends it (R4): it must not count.
STATUS_OF_EACH_CASE = """
    const [cases, done] = [arguments[0], arguments[arguments.length - 1]];
    import('/channel-model.js').then(({ ChannelModel, indicatorFor }) => {
      const me = 'sender';
      const at = (index) => new Date(Date.UTC(2026, 0, 1, 0, 0, index)).toISOString();
      const id = (seq) => (seq > 0 ? `m${seq}` : null);
      const read = (user, cursors) => ({
        user: { id: user }, last_read_message_id: id(cursors.read), last_read: at(0),
        last_delivered_message_id: id(cursors.delivered), last_delivered_at: at(0), unread_messages: 0 });
      done(cases.map((c) => {
        const newest = Math.max(1, c.seq ?? 0, ...c.others.flatMap((cursors) => [cursors.read, cursors.delivered]));
        const author = (seq) => (seq === c.seq && c.own === false ? 'someone' : me);
        const messages = [...Array(newest).keys()].map((offset) => (
          { id: id(offset + 1), text: '', created_at: at(offset + 1), user: { id: author(offset + 1) } }));
        const channel = new ChannelModel({
          channel: { cid: 'messaging:cases', member_count: c.others.length + 1,
                     config: { read_events: c.read_events, delivery_events: c.delivery_events } },
          messages,
          read: [read(me, { read: newest, delivered: newest }),
                 ...c.others.map((cursors, index) => read(`member${index}`, cursors))] }, messages.length + 1);
        if (c.send_state === 'stored') return indicatorFor(channel, messages[c.seq - 1], me)?.status ?? null;
        const waiting = { id: 'waiting', text: '', created_at: at(newest + 1), user: { id: me } };
        return indicatorFor(channel, waiting, me, { status: c.send_state, message: waiting })?.status ?? null;
      }));
    }).catch((error) => done({ error: String(error) }));
"""


def test_the_indicator_gives_each_status_case_of_the_table_shared_with_swift(demo, browsers):
    """Tests/Fixtures/receipt-status-cases.json, which ReceiptRules.status also runs, through the page's
    own indicatorFor as served. The demo has no group policy (one other member is enough), so the
    all_members cases are Swift's alone."""
    with open(STATUS_CASES) as file:
        cases = [case for case in json.load(file)["cases"] if case.get("policy", "any_member") == "any_member"]
    assert len(cases) >= 25 and all("expected" in case for case in cases)
    page = browsers(demo.base_url, "cases")
    statuses = page.driver.execute_async_script(STATUS_OF_EACH_CASE, cases)
    assert isinstance(statuses, list) and len(statuses) == len(cases), statuses
    wrong = [f"{case['name']}: expected {case['expected']}, got {status}"
             for case, status in zip(cases, statuses) if status != case["expected"]]
    assert not wrong, "\n".join(wrong)


# MARK: Failures


def test_pending_then_failed_then_resent_and_a_reconnected_page_catches_up(tmp_path, browsers):
    credentials = {"api_key": "restartkey", "api_secret": secrets.token_urlsafe(48)}
    data = tmp_path / "data"
    server = TicksProcess(data, extra_args=["--demo"], **credentials)
    try:
        api = stream(server)
        api.upsert_users({"id": "hal", "name": "Hal"})
        ivy = browsers(server.base_url, "ivy")
        ivy.sign_in("ivy", "Ivy")
        ivy.create_channel("Plans", ["hal"])
        # A server that does not answer (paused): the message waits with a clock, then is sent.
        server.process.send_signal(signal.SIGSTOP)
        try:
            ivy.send("first")
            pending = ivy.wait_status("first", "pending")
            assert pending.get_attribute("aria-label") == "Sending"
            ivy.shot("pending")
        finally:
            server.process.send_signal(signal.SIGCONT)
        ivy.wait_status("first", "sent")
        cid = ivy.find("#conversation").get_attribute("data-cid")

        # The server goes away: the page says so, and a message sent now fails.
        assert server.stop() == 0, server.output()
        ivy.wait(lambda: ivy.find("#connection").get_attribute("data-state") == "reconnecting", "offline")
        ivy.send("second")
        failed = ivy.wait_status("second", "failed")
        assert failed.get_attribute("aria-label") == "Not sent"
        assert ivy.message("second").find_element("css selector", "button.resend").text == "Resend"
        ivy.shot("failed")

        # Meanwhile hal reads "first" through another node on the same data: ivy's page gets no event for it.
        other = TicksProcess(data, extra_args=["--demo"], **credentials)
        stream(other).mark_read(cid, "hal")
        assert other.stop() == 0, other.output()

        # The server is back on its port: the page reconnects, reloads, and shows the read it missed.
        server = TicksProcess(data, extra_args=["--demo"], port=server.port, **credentials)
        ivy.wait(lambda: ivy.find("#connection").get_attribute("data-state") == "connected", "reconnected")
        ivy.wait_status("first", "read", read_count=1)
        assert ivy.status("second") == "failed"  # a failed message waits for Resend
        ivy.shot("caught-up")

        ivy.message("second").find_element("css selector", "button.resend").click()
        ivy.wait_status("second", "sent")
        ivy.shot("resent")
        messages = stream(server).query_channel(cid, messages_limit=10)["messages"]
        assert [m["text"] for m in messages] == ["first", "second"]
    finally:
        if server.process.poll() is None:
            assert server.stop() == 0, server.output()


# MARK: Reading rules, keyboard and small screens


def test_nothing_is_read_while_the_tab_is_hidden_or_the_list_scrolled_up(demo, browsers):
    jon = browsers(demo.base_url, "jon")
    jon.sign_in("jon", "Jon")
    kim = browsers(demo.base_url, "kim")
    kim.sign_in("kim", "Kim")
    kim.create_channel("Hidden", ["jon"])
    kim.send("hello")
    jon.open_channel("Hidden")
    kim.wait_status("hello", "read", read_count=1)

    # jon switches to another tab: his page still receives, but does not read.
    page = jon.driver.current_window_handle
    jon.driver.switch_to.new_window("tab")
    jon.driver.get("about:blank")
    kim.send("are you there?")
    kim.wait_status("are you there?", "delivered")
    kim.shot("delivered-while-hidden")
    assert kim.status("are you there?") == "delivered"
    jon.driver.close()
    jon.driver.switch_to.window(page)
    kim.wait_status("are you there?", "read", read_count=1)
    kim.shot("read-when-back")

    # jon scrolls up to older messages: a new one is received, not read, until he is back at the bottom.
    cid = kim.find("#conversation").get_attribute("data-cid")
    api = stream(demo)
    for number in range(30):
        api.send_message(cid, "kim", f"line {number}")
    kim.send("the newest")
    kim.wait_status("the newest", "read")
    jon.driver.execute_script("document.getElementById('messages').scrollTop = 0")
    kim.send("up there?")
    kim.wait_status("up there?", "delivered")
    jon.wait(lambda: jon.message("up there?") is not None, "jon's page to have it")
    assert kim.status("up there?") == "delivered"
    jon.shot("scrolled-up")
    jon.driver.execute_script("const list = document.getElementById('messages'); list.scrollTop = list.scrollHeight")
    kim.wait_status("up there?", "read", read_count=1)
    kim.shot("read-at-the-bottom")


def test_keyboard_and_a_320_pixel_screen(demo, browsers):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    lee = browsers(demo.base_url, "lee")
    lee.sign_in("lee", "Lee")
    mia = browsers(demo.base_url, "mia", width=320, height=640)
    mia.sign_in("mia", "Mia")
    mia.shot("list")
    mia.create_channel("Small", ["lee"])
    mia.send("Tiny screen, long message that has to wrap onto several lines")
    lee.open_channel("Small")
    mia.wait_status("Tiny screen, long message that has to wrap onto several lines", "read")
    assert mia.driver.execute_script("return window.innerWidth") == 320
    assert mia.driver.execute_script("return document.documentElement.scrollWidth") <= 320
    mia.shot("conversation")

    # From the message log, Tab reaches the indicator and Enter opens the sheet; Escape closes it.
    mia.driver.execute_script("document.getElementById('messages').focus()")
    ActionChains(mia.driver).send_keys(Keys.TAB).perform()
    focused = mia.driver.switch_to.active_element
    assert focused.get_attribute("data-status") == "read", focused.get_attribute("outerHTML")
    ActionChains(mia.driver).send_keys(Keys.ENTER).perform()
    mia.wait(lambda: mia.find("#receipts").get_attribute("open") is not None, "the sheet")
    mia.wait(lambda: mia.find("#read-by li[data-user-id='lee']"), "lee in Read by")
    assert mia.driver.execute_script("return document.documentElement.scrollWidth") <= 320
    mia.shot("sheet")
    ActionChains(mia.driver).send_keys(Keys.ESCAPE).perform()
    mia.wait(lambda: mia.find("#receipts").get_attribute("open") is None, "the sheet to close")

    mia.find("#back").click()
    mia.wait(lambda: mia.find("#channel-list").is_displayed(), "the channel list")
    mia.shot("back")


# MARK: Without --demo


def test_without_demo_there_is_no_page_and_no_token(ticks):
    for method, path, body in [("GET", "/", None), ("GET", "/ticks-demo.js", None),
                               ("POST", "/demo/token", b'{"user_id": "eve"}')]:
        request = urllib.request.Request(ticks.base_url + path, data=body, method=method)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 404
        assert b'"code":16' in refused.value.read().replace(b" ", b"")

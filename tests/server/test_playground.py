"""Headless Chromium (the Debian chromium + chromium-driver, driven by
selenium; nothing downloaded) loads the playground, sends a request, reads
the rendered call back from the page, sends a tool result and resets.  The
screenshot is kept as BUILD/playground.png."""
import os

import pytest
from conftest import BUILD, KEY, ROOT
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = os.environ.get("NEEDLE_CHROMIUM", "/usr/bin/chromium")
DRIVER = os.environ.get("NEEDLE_CHROMEDRIVER", "/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser():
    os.environ["SE_OFFLINE"] = "true"  # selenium manager must not fetch anything
    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
              "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


def test_playground_sends_a_request_and_renders_the_call(server, browser):
    wait = WebDriverWait(browser, 30)
    browser.get(server.base + "/")
    assert "needle playground" in browser.title
    # the demo tools are preloaded from the server's --tools
    wait.until(lambda d: "set_lights" in d.find_element(By.ID, "tools").get_attribute("value"))
    browser.find_element(By.ID, "apikey").send_keys(KEY)
    browser.find_element(By.ID, "request").send_keys("turn off the kitchen lights")
    browser.find_element(By.ID, "send").click()
    row = wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, "#calls tbody tr.call")))
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1] == "set_lights", cells
    assert '"room": "kitchen"' in cells[2] and '"on": false' in cells[2], cells
    assert '"finish_reason": "tool_calls"' in browser.find_element(By.ID, "json").text
    width = browser.find_element(By.ID, "confidence-bar").value_of_css_property("width")
    assert float(width.rstrip("px")) > 0
    assert "ms" in browser.find_element(By.ID, "timings").text
    os.makedirs(os.path.join(ROOT, BUILD), exist_ok=True)
    assert browser.save_screenshot(os.path.join(ROOT, BUILD, "playground.png"))
    # multi-turn: the tool result box continues the conversation (the server reuses the session)
    result_box = browser.find_element(By.ID, "tool-result")
    result_box.clear()
    result_box.send_keys('{"ok": true}')
    browser.find_element(By.ID, "send-result").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#log li")) == 4)
    assert '"session": "reused"' in browser.find_element(By.ID, "json").text
    # a bad tools text is reported on the page, not sent
    browser.find_element(By.ID, "tools").send_keys("}")
    browser.find_element(By.ID, "request").send_keys("lock the front door")
    browser.find_element(By.ID, "send").click()
    assert "not valid JSON" in wait.until(EC.visibility_of_element_located((By.ID, "tools-error"))).text
    browser.find_element(By.ID, "reset").click()
    assert browser.find_elements(By.CSS_SELECTOR, "#log li") == []

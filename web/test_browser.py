"""Headless Chromium (Debian chromium + chromium-driver, driven by selenium; nothing
downloaded) opens web/index.html from a local static file server, lets the page load the
WebAssembly build and the bundled model, sends the README's request and reads the call back
from the page.  Run from the repository root after `make wasm`:
    python3 web/test_browser.py        (prints "N passed, N failed"; exit 0 when all pass)
The page's own timings (decode tok/s in the browser) are printed."""
import functools
import http.server
import os
import sys
import threading

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = os.environ.get("NEEDLE_CHROMIUM", "/usr/bin/chromium")
DRIVER = os.environ.get("NEEDLE_CHROMEDRIVER", "/usr/bin/chromedriver")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".wasm": "application/wasm"}

    def log_message(self, *args):
        pass


def main():
    if not os.path.exists(os.path.join(ROOT, "web", "dist", "needle-core.wasm")):
        print("web/dist/needle-core.wasm missing: run make wasm first")
        print("0 passed, 1 failed")
        return 1
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=ROOT))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/web/index.html" % server.server_address[1]

    os.environ["SE_OFFLINE"] = "true"  # selenium manager must not fetch anything
    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(a)
    passed = failed = 0

    def check(name, ok, detail=""):
        nonlocal passed, failed
        print(("ok      " if ok else "not ok  ") + name + ("" if ok or not detail else ": " + detail))
        if ok:
            passed += 1
        else:
            failed += 1

    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        drv.set_page_load_timeout(60)
        drv.get(url)
        wait = WebDriverWait(drv, 120)
        state = lambda d: d.find_element(By.ID, "status").text
        wait.until(lambda d: state(d) in ("ready",) or "error" in d.find_element(By.ID, "status").get_attribute("class"))
        check("page_loads_module_and_model", state(drv) == "ready", state(drv))
        for turn in (1, 2):  # the second turn runs warm (the engine has compiled the hot code)
            drv.find_element(By.ID, "send").click()
            wait.until(lambda d: state(d) in ("done", "the model could not answer")
                       or "error" in d.find_element(By.ID, "status").get_attribute("class"))
            rows = drv.find_elements(By.CSS_SELECTOR, "#calls tbody tr.call")
            cells = [td.text for td in rows[0].find_elements(By.TAG_NAME, "td")] if rows else []
            check("turn%d_answers_set_lights_kitchen_off" % turn,
                  len(cells) == 2 and cells[0] == "set_lights" and '"room":"kitchen"' in cells[1]
                  and '"on":false' in cells[1], "%s / %s" % (state(drv), cells))
            print("  turn %d in Chromium: %s" % (turn, drv.find_element(By.ID, "speed").text))
        drv.save_screenshot(os.path.join(ROOT, "web", "dist", "browser.png"))
    finally:
        drv.quit()
        server.shutdown()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

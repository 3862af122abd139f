"""Fragile spots mended (issue 20): each test reproduces the failure the old code had."""

from __future__ import annotations


from da3_litert_farm.report import report_check

GOOD_PNG = b"\x89PNG\r\n\x1a\n last good screenshot"


class FailingScreenshotDriver:
    """A page that passes every check, in a browser whose screenshot fails as selenium reports it."""

    def __init__(self, aspects: list[str]):
        self.state = {"ready": "complete", "images": [{"src": "a.png", "complete": True, "width": 640}],
                      "models": aspects, "letterbox": aspects, "warning": None, "height": 1200}

    def get(self, url):
        pass

    def execute_script(self, script):
        return self.state if script == report_check.PAGE_STATE else True

    def get_log(self, kind):
        return []

    def set_window_size(self, width, height):
        pass

    def save_screenshot(self, filename):
        return False  # selenium's answer when the driver's PNG cannot be written; no file is made

    def quit(self):
        pass


def test_a_failed_screenshot_keeps_the_last_good_one_and_is_reported(tmp_path, monkeypatch):
    page = tmp_path / "index.html"
    page.write_text("<html></html>")
    screenshot = tmp_path / "screenshot.png"
    screenshot.write_bytes(GOOD_PNG)
    monkeypatch.setattr(report_check, "find_browser", lambda: report_check.Browser("chromium", "chromedriver"))
    monkeypatch.setattr(report_check, "open_browser", lambda browser, profile: FailingScreenshotDriver(["16x9"]))
    catalog = {"models": [{"aspect": "16x9"}]}

    problems, _ = report_check.check_report(page, catalog, screenshot)

    assert screenshot.read_bytes() == GOOD_PNG
    assert problems == [f"the browser could not take the screenshot; {screenshot} is left as it was"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html", "screenshot.png"]  # no temp file left

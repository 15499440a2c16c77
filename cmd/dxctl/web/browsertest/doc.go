// Package browsertest drives dxctl web in headless Chromium (chromedp). It is a module of its own so
// that the browser driver never enters dxredis's go.mod. The tests skip when Chromium is absent,
// unless DXCTL_WEB_REQUIRE_BROWSER=1 (CI) makes that a failure.
package browsertest

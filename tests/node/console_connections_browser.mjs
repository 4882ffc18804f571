// Drives the console's connections page in headless Chromium (npm playwright-core +
// Debian's chromium), for tests/tests/console.rs: a user signs in with their own API
// key, sees the OAuth upstream not connected, presses Connect, confirms on the
// gateway's connect page, passes the upstream's authorization server (signed in there
// as USER: its `user` cookie, what the mock server takes for a session) and lands on
// the gateway's "connected" page; back on the console the upstream shows connected
// with its scope and expiry; Disconnect turns it back with a notice. Every wait is
// bounded; each step saves a screenshot to $SCREENSHOT_DIR and prints `step <name>
// ok`; the last line is a JSON summary. Exits non-zero on the first failed step.
//
// Environment: NODE_MODULES, CHROMIUM, SCREENSHOT_DIR, GATEWAY_URL, USER_KEY (the
// user's own API key), USER (its subject), TENANT, UPSTREAM (the OAuth upstream's
// name), AUTH_SERVER (the upstream's authorization server's base URL).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { WAIT, check, checkLabels, env, finish, launch } from "./browser_kit.mjs";

const [base, key, user, tenant, upstream, authServer, shots] = [
  "GATEWAY_URL",
  "USER_KEY",
  "USER",
  "TENANT",
  "UPSTREAM",
  "AUTH_SERVER",
  "SCREENSHOT_DIR",
].map(env);
mkdirSync(shots, { recursive: true });
const summary = {};

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
}

// The upstream's row on the connections page: whether it says connected.
async function connected(page) {
  const row = page.locator(`tr[data-connection="${upstream}"]`);
  await row.waitFor(WAIT);
  return (await row.getAttribute("data-connected")) === "true";
}

const browser = await launch();
const elsewhere = [];
const consoleErrors = [];
await finish(browser, async () => {
  const context = await browser.newContext({ viewport: { width: 1366, height: 860 } });
  // Nothing leaves the machine: a request to anywhere but the gateway and the
  // authorization server is aborted before it is sent, and noted.
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(base) || url.startsWith(authServer)) return route.continue();
    elsewhere.push(url);
    return route.abort();
  });
  // Signed in at the upstream's authorization server as the user.
  await context.addCookies([{ name: "user", value: user, url: authServer, sameSite: "Lax" }]);
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  page.on("console", (message) => {
    // A missing favicon on the gateway's plain connect pages is no failure.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      consoleErrors.push(message.text());
    }
  });

  // Sign in with the user's own key; the Connections page from the navigation.
  await page.goto(`${base}/console`, WAIT);
  check(page.url().endsWith("/console/login"), `not sent to the sign-in page: ${page.url()}`);
  await page.fill("#token", key);
  await Promise.all([page.waitForURL(`${base}/console`, WAIT), page.click('button[type="submit"]')]);
  const who = await page.locator("header .who span").textContent();
  check(who.includes(`${user} of tenant ${tenant}`), `signed in as: ${who}`);
  await Promise.all([
    page.waitForURL(`${base}/console/connections`, WAIT),
    page.click('nav a[href="/console/connections"]'),
  ]);
  check(!(await connected(page)), `${upstream} connected before connecting`);
  await checkLabels(page);
  await shot(page, "20-connections");
  console.log("step connections ok");

  // Connect: the gateway's own connect page, naming whose account connects where.
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${base}/oauth/connect/`), WAIT),
    page.click(`button[aria-label="Connect ${upstream}"]`),
  ]);
  const intro = await page.locator("body").innerText();
  check(intro.includes(user) && intro.includes(tenant) && intro.includes(upstream), `connect page: ${intro}`);
  await shot(page, "21-connect-link");
  console.log("step connect-link ok");

  // Its button: the authorization server (signed in, it consents at once) and back
  // to the gateway's callback.
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${base}/oauth/callback`), WAIT),
    page.getByRole("button", { name: `Continue to ${upstream}` }).click(),
  ]);
  const done = await page.locator("body").innerText();
  check(done.includes("is connected"), `callback page: ${done}`);
  await shot(page, "22-connected");
  console.log("step connected ok");

  // Back on the console: connected, with the scope granted and the token's expiry.
  await page.goto(`${base}/console/connections`, WAIT);
  check(await connected(page), `${upstream} not connected after connecting`);
  const cells = await page.locator(`tr[data-connection="${upstream}"] td`).allTextContents();
  check(cells[1] === "whoami", `scope: ${cells}`);
  check(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/.test(cells[2]), `expiry: ${cells}`);
  summary.scope = cells[1];
  await checkLabels(page);
  await shot(page, "23-connections-connected");
  console.log("step connections-connected ok");

  // Disconnect: back to not connected, with a notice.
  await Promise.all([
    page.waitForURL(/\/disconnect$/, WAIT),
    page.click(`button[aria-label="Disconnect ${upstream}"]`),
  ]);
  const notice = await page.locator("main .notice").first().textContent();
  check(notice.startsWith(`Disconnected from ${upstream}`), `disconnect notice: ${notice}`);
  check(!(await connected(page)), `${upstream} still connected after disconnecting`);
  await checkLabels(page);
  await shot(page, "24-disconnected");
  console.log("step disconnected ok");

  check(consoleErrors.length === 0, `browser console errors: ${consoleErrors}`);
  check(elsewhere.length === 0, `requests outside the gateway and the authorization server: ${elsewhere}`);
}, summary);

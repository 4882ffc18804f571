// Connects one user's account through a gateway connect link in headless Chromium
// (npm playwright-core + Debian's chromium), for tests/tests/oidc_upstream.rs: the
// gateway's connect page, its button, the OpenID provider's own sign-in page (signed
// in as LOGIN) and consent page, then the gateway's "connected" page. A fresh browser
// profile each run: no one else's session at the provider. Every wait is bounded; each
// page is saved as a screenshot to $SCREENSHOT_DIR; one line `step <name> ok` per
// step, and a JSON summary as the last line. Exits non-zero on the first failed step.
//
// Environment: NODE_MODULES, CHROMIUM, SCREENSHOT_DIR, CONNECT_URL, LOGIN (the
// account to sign in as), TENANT, UPSTREAM (the upstream's name in the gateway),
// GATEWAY_URL, ISSUER.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { WAIT, check, env, finish, launch } from "./browser_kit.mjs";

const [link, login, tenant, upstream] = ["CONNECT_URL", "LOGIN", "TENANT", "UPSTREAM"].map(env);
const [gateway, issuer, shots] = ["GATEWAY_URL", "ISSUER", "SCREENSHOT_DIR"].map(env);
mkdirSync(shots, { recursive: true });
const summary = { login };

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${login}-${name}.png`), fullPage: true });
}

const browser = await launch();
const elsewhere = [];
await finish(browser, async () => {
  const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
  // Nothing leaves the machine: a request to anywhere but the gateway and the
  // provider is aborted before it is sent, and noted with the page that made it.
  await context.route("**/*", (route) => {
    const request = route.request();
    const url = request.url();
    if (url.startsWith(gateway) || url.startsWith(issuer)) return route.continue();
    elsewhere.push({ url, page: request.frame().url() });
    return route.abort();
  });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);

  // 1. The gateway's page: whose account, which upstream, one button.
  await page.goto(link, WAIT);
  check((await page.title()) === "Connect an account", `connect page title: ${await page.title()}`);
  const intro = await page.locator("body").innerText();
  check(intro.includes(login) && intro.includes(tenant) && intro.includes(upstream), `connect page: ${intro}`);
  await shot(page, "1-connect");
  console.log("step connect-page ok");

  // 2. The button: to the provider's sign-in page (its own interaction URL).
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${issuer}/interaction/`), WAIT),
    page.getByRole("button", { name: `Continue to ${upstream}` }).click(),
  ]);
  await page.locator('input[name="login"]').waitFor(WAIT);
  await shot(page, "2-sign-in");
  console.log("step provider-sign-in ok");

  // 3. Sign in: the dev login takes any name (the subject) and any password.
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', "any password");
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${issuer}/interaction/`), WAIT),
    page.getByRole("button", { name: "Sign-in" }).click(),
  ]);
  await page.getByRole("button", { name: "Continue" }).waitFor(WAIT);
  const consent = await page.locator("body").innerText();
  // What the gateway asked for, as the provider shows it.
  summary.offline_access_asked = consent.includes("offline access");
  await shot(page, "3-consent");
  console.log("step provider-consent ok");

  // 4. Consent: the provider sends the browser back to the gateway's callback.
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(`${gateway}/oauth/callback`), WAIT),
    page.getByRole("button", { name: "Continue" }).click(),
  ]);
  await page.locator("h1").waitFor(WAIT);
  summary.title = await page.title();
  summary.text = (await page.locator("body").innerText()).trim();
  await shot(page, "4-connected");
  check(summary.title === "Connected", `the gateway's answer: ${summary.title}: ${summary.text}`);
  console.log("step connected ok");

  // The gateway's pages ask for nothing elsewhere. The provider's built-in pages (a
  // development feature) link a web font, which was not fetched.
  const fromGateway = elsewhere.filter((r) => !r.page.startsWith(issuer));
  check(fromGateway.length === 0, `requests to other hosts: ${JSON.stringify(fromGateway)}`);
  summary.blocked = elsewhere.length;
}, summary);

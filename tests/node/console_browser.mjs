// Drives the web console in headless Chromium (npm playwright-core + Debian's
// chromium), for tests/tests/console.rs. Every wait is bounded; each step saves a
// screenshot to $SCREENSHOT_DIR and prints one line `step <name> ok`; the last line
// is a JSON summary. Exits non-zero on the first failed step.
//
// Environment: NODE_MODULES, GATEWAY_URL, ADMIN_TOKEN, TENANT_KEY, TENANT (the key's tenant),
// CALL_TENANT (a tenant allowed every tool), PETSTORE_URL, EV_PID (the MCP server
// the scenario kills), PETSTORE_BASE (where the petstore's calls go), CHROMIUM,
// SCREENSHOT_DIR.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { WAIT, check, checkLabels, env, finish, launch } from "./browser_kit.mjs";

const base = env("GATEWAY_URL");
const shots = env("SCREENSHOT_DIR");
mkdirSync(shots, { recursive: true });
const summary = {};

async function shot(page, name) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
}

async function signIn(page, token) {
  await page.goto(`${base}/console`, WAIT);
  check(page.url().endsWith("/console/login"), `not sent to the sign-in page: ${page.url()}`);
  await page.fill("#token", token);
  await Promise.all([page.waitForURL(`${base}/console`, WAIT), page.click('button[type="submit"]')]);
}

const browser = await launch();
const external = [];
await finish(browser, async () => {
  const admin = await browser.newContext({ viewport: { width: 1366, height: 860 } });
  // No request may leave the gateway's origin: the console works air-gapped.
  admin.on("request", (request) => {
    if (!request.url().startsWith(base)) external.push(request.url());
  });
  const page = await admin.newPage();
  page.setDefaultTimeout(30000);
  const consoleErrors = [];
  page.on("console", (message) => {
    // Answers with an error status are checked where they are expected (the refused
    // sign-in); anything else the page logs as an error is a failure.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      consoleErrors.push(message.text());
    }
  });

  // Sign-in: a wrong token first, then the admin token.
  await page.goto(`${base}/console`, WAIT);
  await shot(page, "01-login");
  await checkLabels(page);
  await page.fill("#token", "not-the-token");
  await page.click('button[type="submit"]');
  await page.waitForSelector(".notice.bad", WAIT);
  await signIn(page, env("ADMIN_TOKEN"));
  console.log("step login ok");

  // Two upstreams, both healthy.
  await page.waitForSelector('tr[data-upstream="ev"] [data-state="healthy"]', WAIT);
  await page.waitForSelector('tr[data-upstream="notes"] [data-state="healthy"]', WAIT);
  const rows = await page.locator("tr[data-upstream]").count();
  check(rows === 2, `expected 2 upstreams, saw ${rows}`);
  await shot(page, "02-upstreams");
  await checkLabels(page);
  console.log("step upstreams ok");

  // Catalog search through tool_search, then a tool's detail.
  await page.goto(`${base}/console/catalog`, WAIT);
  await page.fill("#q", "long running operation with progress");
  await Promise.all([page.waitForURL(/q=/, WAIT), page.click('form[role="search"] button')]);
  const first = await page.locator("table.tools tbody tr th a").first().textContent();
  check(first === "ev__trigger-long-running-operation", `first search hit: ${first}`);
  await shot(page, "03-catalog-search");
  await checkLabels(page);
  console.log("step search ok");
  await Promise.all([page.waitForURL(/\/console\/tools\//, WAIT), page.locator("table.tools tbody tr th a").first().click()]);
  const title = await page.locator("h1").textContent();
  check(title === "ev__trigger-long-running-operation", `detail title: ${title}`);
  check((await page.locator("ul.tree code").allTextContents()).includes("duration"), "the schema tree names `duration`");
  check((await page.locator("section[aria-labelledby=export-h] details").count()) === 5, "five export formats");
  await page.locator("section[aria-labelledby=export-h] summary").first().click();
  await shot(page, "04-tool-detail");
  await checkLabels(page);
  console.log("step detail ok");

  // Try it: progress events arrive, then the result with its usage.
  await page.selectOption("#as-tenant", env("CALL_TENANT"));
  await page.fill('[data-arg="duration"]', "3");
  await page.fill('[data-arg="steps"]', "5");
  await page.click('#try button[type="submit"]');
  await page.waitForSelector('#events li[data-event="tool_progress"]', WAIT);
  // Events arrive while the call runs: the first progress before the result.
  const resultEarly = await page.locator("#truncated").count();
  await page.waitForSelector("#truncated", WAIT);
  const progress = await page.locator('#events li[data-event="tool_progress"]').count();
  const kinds = await page.locator("#events li").evaluateAll((items) => items.map((i) => i.dataset.event));
  check(kinds[0] === "tool_call_start", `first event: ${kinds[0]}`);
  check(kinds.includes("tool_call_complete"), `events: ${kinds}`);
  check(progress >= 3, `progress events: ${progress}`);
  check(resultEarly === 0, "the result was there before the first progress event");
  summary.progress_events = progress;
  await page.evaluate(() => document.getElementById("try-h").scrollIntoView());
  await shot(page, "05-try-tool");
  console.log("step try ok");

  // A result over its upstream's token budget comes back cut, and says so.
  await page.goto(`${base}/console/tools/notes__listNotes`, WAIT);
  await page.selectOption("#as-tenant", env("CALL_TENANT"));
  await page.click('#try button[type="submit"]');
  await page.waitForSelector("#truncated", WAIT);
  const truncated = await page.locator("#truncated").textContent();
  check(truncated.startsWith("yes"), `notes__listNotes truncated: ${truncated}`);
  await page.evaluate(() => document.getElementById("try-h").scrollIntoView());
  await shot(page, "05-try-truncated");
  console.log("step truncated ok");

  // Register the petstore spec by URL and read the report.
  await page.goto(`${base}/console/register`, WAIT);
  await page.fill("#reg-name", "petstore");
  await page.fill("#reg-url", env("PETSTORE_URL"));
  await page.fill("#reg-base", env("PETSTORE_BASE"));
  await page.check("#reg-private");
  // The report before: a dry run that changes nothing, the form kept for the import.
  await Promise.all([page.waitForLoadState("load"), page.click('#register button[value="preview"]')]);
  await page.waitForSelector("#report", WAIT);
  const previewed = await page.locator("#report-h").textContent();
  check(previewed.includes("would be imported"), `preview heading: ${previewed}`);
  check(parseInt(await page.locator("#imported").textContent(), 10) > 0, "the preview imports tools");
  check((await page.inputValue("#reg-url")) === env("PETSTORE_URL"), "the form keeps the spec URL");
  await shot(page, "06-register-preview");
  await checkLabels(page);
  const before = await page.request.get(`${base}/console/upstreams/fragment`);
  check(!(await before.text()).includes('data-upstream="petstore"'), "a preview mounts nothing");
  // The report after: the import.
  await Promise.all([page.waitForLoadState("load"), page.click('#register button[value="import"]')]);
  await page.waitForSelector("#report", WAIT);
  const done = await page.locator("#report-h").textContent();
  check(done === "petstore imported", `import heading: ${done}`);
  const imported = parseInt(await page.locator("#imported").textContent(), 10);
  check(imported > 0, `imported ${imported}`);
  const tokens = parseInt(await page.locator("#catalog-tokens").textContent(), 10);
  check(tokens > 0, `token cost ${tokens}`);
  summary.petstore_imported = imported;
  await shot(page, "07-register");
  console.log("step register ok");
  await page.goto(`${base}/console`, WAIT);
  await page.waitForSelector('tr[data-upstream="petstore"]', WAIT);
  // Refresh re-imports it and reports again.
  await Promise.all([
    page.waitForURL(/\/petstore\/refresh$/, WAIT),
    page.click('button[aria-label="Refresh petstore"]'),
  ]);
  const refreshed = await page.locator("#report-h").textContent();
  check(refreshed === "petstore refreshed", `refresh heading: ${refreshed}`);
  console.log("step refresh ok");

  // The tenants view: the denied tool is listed as not allowed, with its pattern.
  const tenant = env("TENANT");
  await page.goto(`${base}/console/tenants?tenant=${tenant}&tool=ev__echo`, WAIT);
  const access = await page.locator("#access").textContent();
  check(access === "hidden", `ev__echo access: ${access}`);
  const why = await page.locator("#explanation").textContent();
  check(why.includes("!ev__echo"), `explanation: ${why}`);
  const allowed = await page.locator("#allowed tbody th").allTextContents();
  check(!allowed.includes("ev__echo") && allowed.includes("ev__get-sum"), `allowed: ${allowed}`);
  const denied = await page.locator("#denied tbody tr", { hasText: "ev__echo" }).textContent();
  check(denied.includes("denied by"), `denied row: ${denied}`);
  await shot(page, "08-tenants");
  await checkLabels(page);
  console.log("step tenants ok");

  // Reloads and health.
  await page.goto(`${base}/console/health`, WAIT);
  const ready = await page.locator("#readiness").textContent();
  check(ready === "ready", `readiness: ${ready}`);
  await shot(page, "09-health");
  console.log("step health ok");

  // The same console as the tenant: read-only, without the denied tool.
  const tenantContext = await browser.newContext({ viewport: { width: 1366, height: 860 } });
  tenantContext.on("request", (request) => {
    if (!request.url().startsWith(base)) external.push(request.url());
  });
  const tenantPage = await tenantContext.newPage();
  await signIn(tenantPage, env("TENANT_KEY"));
  check((await tenantPage.locator('a[href="/console/register"]').count()) === 0, "a tenant sees no register page");
  await tenantPage.goto(`${base}/console/catalog?upstream=ev`, WAIT);
  const names = await tenantPage.locator("table.tools tbody th").allTextContents();
  check(names.length > 0 && !names.includes("ev__echo"), `tenant catalog: ${names}`);
  await shot(tenantPage, "10-tenant-catalog");
  const hidden = await tenantPage.goto(`${base}/console/tools/ev__echo`, WAIT);
  check(hidden.status() === 404, `tenant opening ev__echo: ${hidden.status()}`);
  const register = await tenantPage.goto(`${base}/console/register`, WAIT);
  check(register.status() === 404, `tenant opening the register page: ${register.status()}`);
  await tenantContext.close();
  console.log("step tenant-view ok");

  // Kill the MCP server and watch its row turn down, without reloading the page.
  await page.goto(`${base}/console`, WAIT);
  const spark = await page.locator('tr[data-upstream="ev"] svg.spark title').textContent();
  check(/^[1-9]\d* calls/.test(spark), `ev sparkline: ${spark}`);
  process.kill(parseInt(env("EV_PID"), 10), "SIGKILL");
  await page.waitForSelector('tr[data-upstream="ev"] [data-state="down"]', { timeout: 45000 });
  check((await page.locator('tr[data-upstream="notes"] [data-state="healthy"]').count()) === 1, "notes stays healthy");
  await shot(page, "11-upstream-down");
  // A small one for docs/console.md (docs/console.png is a copy).
  await page.screenshot({ path: join(shots, "readme-upstreams.png"), clip: { x: 0, y: 0, width: 1280, height: 480 } });
  console.log("step down ok");

  // Delete the registered API: its row goes.
  await Promise.all([
    page.waitForURL(/\/petstore\/delete$/, WAIT),
    page.click('button[aria-label="Delete petstore"]'),
  ]);
  const removed = await page.locator("main .notice").textContent();
  check(removed === "petstore was removed.", `delete notice: ${removed}`);
  await page.goto(`${base}/console`, WAIT);
  check((await page.locator('tr[data-upstream="petstore"]').count()) === 0, "petstore is gone");
  console.log("step delete ok");

  check(consoleErrors.length === 0, `browser console errors: ${consoleErrors}`);
  check(external.length === 0, `requests outside the gateway: ${external}`);
}, summary);

// What the browser tests share (tests/node/*_browser.mjs): reading their environment,
// failing a step, the accessibility check of every page, and Debian's chromium driven
// by npm playwright-core.
import { createRequire } from "node:module";
import { join } from "node:path";

/// Every wait of a step.
export const WAIT = { timeout: 30000 };

/// A variable the Rust test sets; a missing one ends the run.
export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/// Every visible form control has a label (or an aria-label), every button a name.
export async function checkLabels(page) {
  const unlabelled = await page.evaluate(() =>
    Array.from(document.querySelectorAll("input, select, textarea, button"))
      .filter((el) => el.type !== "hidden")
      .filter((el) => {
        if (el.tagName === "BUTTON") return !(el.textContent.trim() || el.getAttribute("aria-label"));
        return !((el.labels && el.labels.length) || el.getAttribute("aria-label"));
      })
      .map((el) => el.outerHTML.slice(0, 80)),
  );
  check(unlabelled.length === 0, `unlabelled controls on ${page.url()}: ${unlabelled}`);
}

/// Headless chromium at $CHROMIUM, with playwright-core from the test dependencies'
/// node_modules ($NODE_MODULES, as the Rust test finds it; the workspace's otherwise).
export async function launch() {
  const modules = process.env.NODE_MODULES || new URL("../../node_modules/", import.meta.url).pathname;
  const { chromium } = createRequire(join(modules, "resolve.js"))("playwright-core");
  return chromium.launch({
    executablePath: env("CHROMIUM"),
    headless: true,
    // Root in a container has no user namespaces for the sandbox.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    timeout: 60000,
  });
}

/// Runs `steps` with the browser, closes it, and ends the process as the Rust test
/// reads it: the first failure's stack and exit 1, or the summary as the last line.
export async function finish(browser, steps, summary) {
  let failed = null;
  try {
    await steps();
  } catch (error) {
    failed = error;
  } finally {
    await browser.close();
  }
  if (failed) {
    console.log(`FAILED: ${failed.stack || failed}`);
    process.exit(1);
  }
  console.log(JSON.stringify({ ok: true, ...summary }));
}

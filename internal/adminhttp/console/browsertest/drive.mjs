// drive.mjs runs Debian's Chromium (never a downloaded browser) through the
// monolock console for the Go test beside it (../browser_test.go), which
// owns the server and the lock clients. It speaks in lines: each command on
// stdin is answered by one line on stdout, "ok …" or "fail …"; playwright's
// waits are events (a selector appears, a dialog closes), bounded by
// STEP_MS.
//
//	drive.mjs URL CHROMIUM [--CHROMIUM-FLAG...] [CERT KEY]
//
// Arguments starting with "--" are passed to Chromium (such as
// --host-resolver-rules, to give the page's origin a name that resolves to
// the test's server). With CERT and KEY (PEM files) the browser presents that
// client certificate to URL's origin, and accepts the server's certificate
// from the test's own CA.
//
//	expect NAME HOLDER_ADDR TOKEN WAITER_ADDR   the page shows NAME held by HOLDER_ADDR with TOKEN, WAITER_ADDR queued first
//	holder NAME ADDR                            the page shows NAME held by ADDR, no waiter
//	release-click NAME TOKEN                    force-release NAME with the mouse, the dialog naming TOKEN
//	release-keys NAME                           force-release NAME by keyboard alone
//	kick NAME ADDR                              remove the waiter at ADDR from NAME's queue, accepting the confirmation
//	pages GLOB TOTAL LAST                       filter by GLOB: TOTAL locks, LAST on the second page
//	read-only NAME                              NAME's row has no working release or remove button
//	forge-release NAME                          POST NAME's release from the page's script, bypassing the buttons: the status
//	rebind NAME                                 the status of the page itself, then GET /api/locks and POST NAME's release from the page's script: "page S | GET S ERROR | POST S ERROR"
//	screenshot PATH WIDTH HEIGHT                a screenshot of the page at that viewport
//	quit
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const STEP_MS = 45000;
const [url, executablePath, ...rest] = process.argv.slice(2);
const chromiumFlags = rest.filter((a) => a.startsWith("--"));
const [certPath, keyPath] = rest.filter((a) => !a.startsWith("--"));
if (!url || !executablePath) {
  console.error("usage: drive.mjs URL CHROMIUM [--CHROMIUM-FLAG...] [CERT KEY]");
  process.exit(2);
}
const origin = new URL(url).origin;
const operator = certPath ? { clientCertificates: [{ origin, certPath, keyPath }], ignoreHTTPSErrors: true } : {};

const profile = mkdtempSync(join(tmpdir(), "monolock-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  timeout: STEP_MS,
  viewport: { width: 1280, height: 800 },
  ...operator,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    ...chromiumFlags,
  ],
});
context.setDefaultTimeout(STEP_MS);
const page = context.pages()[0] || (await context.newPage());
// The page must make no request beyond the server that served it.
const foreign = [];
page.on("request", (r) => {
  if (new URL(r.url()).origin !== origin) {
    foreign.push(r.url());
  }
});
const problems = [];
page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
page.on("console", (msg) => {
  // A server without authentication answers /api/whoami 404, which the
  // console expects and Chromium logs all the same. Over plain HTTP at a
  // name other than localhost (a listed tunnel's or service's), Chromium
  // ignores the Cross-Origin-Opener-Policy header, and says so.
  const coopIgnored = msg.text().includes("Cross-Origin-Opener-Policy header has been ignored");
  if (msg.type() === "error" && !msg.location().url.endsWith("/api/whoami") && !coopIgnored) {
    problems.push(`console error: ${msg.text()} (${msg.location().url})`);
  }
});
const landed = await page.goto(url);

const row = (name) => page.locator(`tr[data-lock="${CSS_escape(name)}"]`);

// CSS_escape quotes a lock name for an attribute selector.
function CSS_escape(s) {
  return s.replace(/["\\]/g, "\\$&");
}

async function expectText(locator, text) {
  await locator.filter({ hasText: text }).first().waitFor();
}

const commands = {
  async expect(name, holder, token, waiter) {
    const r = row(name);
    await expectText(r, holder);
    await expectText(r, token);
    // The queue opens on a click on its summary; the first waiter is #1.
    const details = r.locator("details");
    if (!(await details.evaluate((d) => d.open))) {
      await r.locator("summary").click();
    }
    const first = r.locator("ol.waiters li").first();
    await expectText(first, "#1");
    await expectText(first, waiter);
    return `${name} held by ${holder} with token ${token}, ${waiter} first in its queue`;
  },

  async holder(name, addr) {
    const r = row(name);
    await expectText(r, addr);
    await r.locator("td", { hasText: "none" }).first().waitFor();
    return `${name} held by ${addr}, nobody waiting`;
  },

  async "release-click"(name, token) {
    await row(name).getByRole("button", { name: "Force-release" }).click();
    const dialog = page.locator("#release-dialog");
    await dialog.waitFor();
    const shown = await page.locator("#release-token").textContent();
    if (shown !== token) {
      throw new Error(`the dialog says the next token is above ${shown}, want ${token}`);
    }
    const submit = page.locator("#release-submit");
    await page.locator("#release-confirm").fill(name.slice(0, -1));
    if (!(await submit.isDisabled())) {
      throw new Error("the release button works before the whole name is typed");
    }
    await page.locator("#release-confirm").fill(name);
    await submit.click();
    await dialog.waitFor({ state: "hidden" });
    return `released ${name} from the dialog`;
  },

  async "release-keys"(name) {
    // From the top of the page, Tab until the lock's release button has
    // the focus, as a keyboard user would.
    await page.evaluate(() => document.activeElement && document.activeElement.blur());
    const key = `release:${name}`;
    let presses = 0;
    for (; presses < 50; presses++) {
      if ((await page.evaluate(() => document.activeElement && document.activeElement.dataset.key)) === key) {
        break;
      }
      await page.keyboard.press("Tab");
    }
    if (presses === 50) {
      throw new Error(`50 presses of Tab never reached the release button of ${name}`);
    }
    // Enter opens the dialog with the focus in its input; Escape leaves it
    // without a release; Enter again, the name typed, Enter: released.
    await page.keyboard.press("Enter");
    const dialog = page.locator("#release-dialog");
    await dialog.waitFor();
    if ((await page.evaluate(() => document.activeElement.id)) !== "release-confirm") {
      throw new Error("the dialog opened without the focus in its name field");
    }
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    await page.keyboard.press("Enter"); // the focus is back on the button
    await dialog.waitFor();
    await page.keyboard.type(name);
    await page.keyboard.press("Enter");
    await dialog.waitFor({ state: "hidden" });
    return `released ${name} by keyboard after ${presses} presses of Tab`;
  },

  async kick(name, addr) {
    const r = row(name);
    const details = r.locator("details");
    if (!(await details.evaluate((d) => d.open))) {
      await r.locator("summary").click();
    }
    const waiter = r.locator("ol.waiters li", { hasText: addr });
    page.once("dialog", (d) => d.accept());
    await waiter.getByRole("button", { name: "Remove" }).click();
    await waiter.waitFor({ state: "detached" });
    return `removed ${addr} from ${name}'s queue`;
  },

  async pages(glob, total, last) {
    await page.locator("#match").fill(glob);
    await page.locator("#match").press("Enter");
    await page.locator("#page", { hasText: `of ${total}` }).waitFor();
    if (await row(last).count()) {
      throw new Error(`${last} is on the first page`);
    }
    await page.getByRole("button", { name: "Next page" }).click();
    await row(last).waitFor();
    await page.locator("#page", { hasText: "page 2" }).waitFor();
    if (await page.getByRole("button", { name: "Next page" }).isEnabled()) {
      throw new Error("the last page offers a next page");
    }
    // Back to every lock, for the commands that follow.
    await page.locator("#match").fill("");
    await page.locator("#match").press("Enter");
    await page.locator("#page", { hasText: "page 1" }).waitFor();
    return `${total} locks matched ${glob}, ${last} on page 2`;
  },

  async "read-only"(name) {
    const r = row(name);
    await r.waitFor();
    await expectText(page.locator("#roles"), "roles: read.");
    const details = r.locator("details");
    if ((await details.count()) && !(await details.evaluate((d) => d.open))) {
      await r.locator("summary").click();
    }
    const buttons = r.getByRole("button", { name: /Force-release|Remove/ });
    const n = await buttons.count();
    for (let i = 0; i < n; i++) {
      if (await buttons.nth(i).isEnabled()) {
        throw new Error(`${name} has a working ${await buttons.nth(i).textContent()} button`);
      }
    }
    return `${name} shows no working release or remove button`;
  },

  async "forge-release"(name) {
    const status = await page.evaluate(async (name) => {
      const res = await fetch(`/api/locks/${encodeURIComponent(name)}/release`, { method: "POST" });
      return `${res.status} ${(await res.json()).error || ""}`;
    }, name);
    // Chromium logs the refusal it was meant to get.
    for (let i = problems.length - 1; i >= 0; i--) {
      if (problems[i].endsWith("/release)")) {
        problems.splice(i, 1);
      }
    }
    return status;
  },

  async rebind(name) {
    const calls = await page.evaluate(async (name) => {
      const out = [];
      for (const [method, path] of [
        ["GET", "/api/locks"],
        ["POST", `/api/locks/${encodeURIComponent(name)}/release`],
      ]) {
        const res = await fetch(path, { method });
        const body = await res.json().catch(() => ({}));
        out.push(`${method} ${res.status} ${body.error || ""}`);
      }
      return out.join(" | ");
    }, name);
    // Chromium logs the refusals the page was meant to get.
    for (let i = problems.length - 1; i >= 0; i--) {
      if (problems[i].includes("status of 421")) {
        problems.splice(i, 1);
      }
    }
    return `page ${landed.status()} | ${calls}`;
  },

  async screenshot(path, width, height) {
    // The rates need two polls; the shot waits for them.
    await page.waitForFunction(() => !document.getElementById("summary").textContent.includes("…"));
    await page.setViewportSize({ width: Number(width), height: Number(height) });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    await page.screenshot({ path, fullPage: false });
    await page.setViewportSize({ width: 1280, height: 800 });
    if (overflow > 0) {
      throw new Error(`at ${width}×${height} the page is ${overflow}px wider than the screen`);
    }
    return `${path} at ${width}×${height}`;
  },
};

async function run(line) {
  const [cmd, ...args] = line.trim().split(/\s+/);
  if (cmd === "quit") {
    return null;
  }
  const f = commands[cmd];
  if (!f) {
    return `fail unknown command ${JSON.stringify(cmd)}`;
  }
  try {
    const said = await f(...args);
    if (foreign.length || problems.length) {
      return `fail ${[...foreign.map((u) => "request to another origin: " + u), ...problems].join("; ")}`;
    }
    return `ok ${said}`;
  } catch (err) {
    return `fail ${cmd}: ${String(err.message).split("\n")[0]}`;
  }
}

try {
  for await (const line of createInterface({ input: process.stdin })) {
    const answer = await run(line);
    if (answer === null) {
      break;
    }
    console.log(answer);
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}

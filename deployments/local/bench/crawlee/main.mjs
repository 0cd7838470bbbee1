// Crawlee's PlaywrightCrawler on the generated web (deployments/local/cmd/websim),
// the other side of the render benchmark (../render-side-by-side.sh, issue 36).
//
//	node main.mjs --ready READY.json [--concurrency 2] [--max-depth 10] [--storage DIR]
//
// READY.json is websim's ready line (its seeds). The crawl is what our
// crawler does with --render always, as Crawlee is meant to be used:
// Debian's Chromium (/usr/bin/chromium, headless), every page loaded in a
// tab, the same rules of scope as the launcher's --web crawl restricted to
// the seed's host (enqueueLinks strategy same-hostname), the same depth
// limit (seeds are depth 0), robots.txt obeyed, images, media and fonts
// blocked (request interception by resource type, as the fetcher's Fetch
// domain does), a page settled when it has been idle 500 ms after its load
// event (Playwright's networkidle: the fetcher's settle rule), its text
// stored (Crawlee's default dataset, JSON files under --storage). It
// prints one JSON line at the end: pages handled, pages whose script-built
// app root had text, failed requests, wall seconds.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PlaywrightCrawler, Configuration, log, LogLevel } from 'crawlee';
import { chromium } from 'playwright';

const { values: args } = parseArgs({
    options: {
        ready: { type: 'string' },
        concurrency: { type: 'string', default: '2' },
        'max-depth': { type: 'string', default: '10' },
        storage: { type: 'string', default: './storage' },
        chromium: { type: 'string', default: '/usr/bin/chromium' },
    },
});
if (!args.ready) {
    console.error('main.mjs: --ready READY.json (websim\'s ready line) is required');
    process.exit(2);
}
const ready = JSON.parse(readFileSync(args.ready, 'utf8'));
const concurrency = Number(args.concurrency);

// Resource types the fetcher's browser blocks (services/fetcher/internal/browser).
const blocked = new Set(['image', 'media', 'font']);
// Links to what is not a page: Chromium would start a download and
// Playwright fail the navigation, three times with Crawlee's retries. The
// fetcher gets them over plain HTTP, never in the browser.
const binaries = [/\.(pdf|zip|gz|docx?|xlsx?|png|jpe?g|gif)(\?|$)/i];

let handled = 0;
let withApp = 0;
let appText = 0;
let failed = 0;

log.setLevel(LogLevel.WARNING);
const config = new Configuration({ storageClientOptions: { localDataDirectory: args.storage }, purgeOnStart: true });

const crawler = new PlaywrightCrawler({
    launchContext: {
        launcher: chromium,
        launchOptions: { executablePath: args.chromium, headless: true },
        useChrome: false,
    },
    // The fetcher renders --render-tabs (2) pages at once, in one Chromium.
    minConcurrency: concurrency,
    maxConcurrency: concurrency,
    // No fingerprint injection: the fetcher sends its own user agent and
    // nothing else, and the injection is a script run in every page.
    browserPoolOptions: { useFingerprints: false },
    maxCrawlDepth: Number(args['max-depth']),
    respectRobotsTxtFile: true,
    navigationTimeoutSecs: 10,
    requestHandlerTimeoutSecs: 30,
    preNavigationHooks: [
        async ({ page }, gotoOptions) => {
            gotoOptions.waitUntil = 'networkidle';
            await page.route('**/*', (route) => (blocked.has(route.request().resourceType()) ? route.abort() : route.continue()));
        },
    ],
    async requestHandler({ request, page, enqueueLinks, pushData }) {
        handled++;
        const { text, app } = await page.evaluate(() => {
            const root = document.getElementById('app');
            return { text: document.body ? document.body.innerText : '', app: root ? root.innerText.length : -1 };
        });
        if (app >= 0) {
            withApp++;
            if (app > 0) appText++;
        }
        await pushData({ url: request.loadedUrl ?? request.url, title: await page.title(), text });
        await enqueueLinks({ strategy: 'same-hostname', exclude: binaries });
    },
    failedRequestHandler() {
        failed++;
    },
}, config);

const start = process.hrtime.bigint();
await crawler.run(ready.seeds);
const wall = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({ pages: handled, app_pages: withApp, app_pages_with_text: appText, failed, wall_s: Number(wall.toFixed(2)), concurrency }));

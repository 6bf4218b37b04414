//! The web console in a real browser: headless Chromium (Debian's `chromium` package; `.ci/run` installs it, or
//! set `CAUSET_CHROMIUM` to another Chromium or Chrome) opens DC 0's admin page of a running 3-DC cluster under
//! load. The page must render the cluster (three DCs, the links to the two peers up, the partitions) and six live
//! charts with data; it must be read-only until the admin token is entered; with the token, cutting the link to
//! DC 1 must show on the page (the link cut, DC 1's remote visibility growing) and at the node, and healing it
//! must bring the link back up. No console error or uncaught exception may happen on the way.
//!
//! `CAUSET_CONSOLE_SCREENSHOTS=<dir>` keeps screenshots of the page (how `docs/console*.png` are made).

use causet::cluster::{self, StartOptions};
use causet_client::{Client, Counter};
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::{Log, Page, Runtime};
use headless_chrome::{Browser, LaunchOptions, Tab};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The browser: `$CAUSET_CHROMIUM`, or the first of Debian's, Ubuntu's and Google's names on the PATH.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CAUSET_CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
        for dir in std::env::split_paths(&path) {
            if dir.join(name).is_file() {
                return dir.join(name);
            }
        }
    }
    panic!(
        "the console test needs Chromium: `apt-get install chromium` (.ci/run installs it), or set CAUSET_CHROMIUM \
         to a Chromium or Chrome binary"
    );
}

/// Evaluates `expression` in the page and returns its value as JSON.
fn eval(tab: &Tab, expression: &str) -> serde_json::Value {
    let result = tab.evaluate(expression, false).unwrap_or_else(|e| panic!("evaluating `{expression}`: {e}"));
    result.value.unwrap_or(serde_json::Value::Null)
}

/// Waits (at most `within`) until `expression` is true in the page; panics with `what` and the page's text if not.
fn wait_for(tab: &Tab, expression: &str, what: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if eval(tab, expression) == serde_json::Value::Bool(true) {
            return;
        }
        if Instant::now() > deadline {
            let text = eval(tab, "document.body.innerText");
            panic!("the console never showed {what} within {within:?} (`{expression}`); the page reads:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The text of the first element `selector` matches.
fn text(tab: &Tab, selector: &str) -> String {
    let js = format!("(document.querySelector({selector:?}) || {{}}).textContent || ''");
    eval(tab, &js).as_str().unwrap_or_default().trim().to_string()
}

/// Writes a screenshot of the page to `$CAUSET_CONSOLE_SCREENSHOTS/<name>` when that is set.
fn screenshot(tab: &Tab, name: &str) {
    let Some(dir) = std::env::var_os("CAUSET_CONSOLE_SCREENSHOTS") else { return };
    let png = tab.capture_screenshot(Page::CaptureScreenshotFormatOption::Png, None, None, true).expect("a screenshot");
    std::fs::create_dir_all(&dir).expect("the screenshot directory");
    std::fs::write(Path::new(&dir).join(name), png).expect("writing the screenshot");
}

/// Collects console errors, uncaught exceptions and error log entries of a tab.
fn watch_errors(tab: &Tab) -> Arc<Mutex<Vec<String>>> {
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = errors.clone();
    tab.add_event_listener(Arc::new(move |event: &Event| {
        let error = match event {
            Event::RuntimeConsoleAPICalled(e)
                if matches!(
                    e.params.Type,
                    Runtime::ConsoleAPICalledEventTypeOption::Error | Runtime::ConsoleAPICalledEventTypeOption::Assert
                ) =>
            {
                let args: Vec<String> = e.params.args.iter().map(|a| format!("{:?}", a.value)).collect();
                Some(format!("console.{:?}: {}", e.params.Type, args.join(" ")))
            }
            Event::RuntimeExceptionThrown(e) => {
                let d = &e.params.exception_details;
                let what = d.exception.as_ref().and_then(|x| x.description.clone()).unwrap_or_default();
                Some(format!("uncaught exception at {:?}:{}: {} {what}", d.url, d.line_number, d.text))
            }
            Event::LogEntryAdded(e) if e.params.entry.level == Log::LogEntryLevel::Error => Some(format!(
                "log error ({:?}): {} {:?}",
                e.params.entry.source, e.params.entry.text, e.params.entry.url
            )),
            _ => None,
        };
        if let Some(error) = error {
            sink.lock().unwrap().push(error);
        }
    }))
    .expect("an event listener");
    tab.enable_log().expect("the log domain");
    tab.enable_runtime().expect("the runtime domain");
    errors
}

/// Whether the node reports the links to `dc` cut.
fn node_says_cut(admin: std::net::SocketAddr, dc: u64) -> bool {
    let body = cluster::http_get(admin, "/status").expect("/status answers");
    let status: serde_json::Value = serde_json::from_str(&body).expect("/status is JSON");
    let peers = status["peers"].as_array().expect("/status has peers");
    let peer = peers.iter().find(|p| p["dc"] == dc).expect("the peer DC is in /status");
    peer["state"] == "cut"
}

#[test]
fn the_console_shows_a_running_three_dc_cluster_live_and_cuts_and_heals_a_link_with_the_token() {
    let browser_path = chromium();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = StartOptions {
        dcs: 3,
        nodes_per_dc: 1,
        partitions: 4,
        wan_delay_ms: 10,
        dir: dir.path().to_path_buf(),
        base_port: 0,
        exe: Some(env!("CARGO_BIN_EXE_causet").into()),
        ..Default::default()
    };
    let file = cluster::start(&options).expect("the cluster starts");
    let _guard = cluster::StopOnDrop(dir.path());
    let admin = file.nodes[0].admin;

    // Load at DC 0 for as long as the browser looks: one session incrementing counters.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, addr) = (stop.clone(), file.dc_clients(0)[0]);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            rt.block_on(async move {
                let mut client = Client::connect(addr).await.expect("connects to DC 0");
                let mut commits = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let counter = Counter::new(format!("c{}", commits % 64), "console-test");
                    // The cluster stops under the thread when the test fails: the main thread reports why.
                    if client.static_update(None, vec![counter.increment(1)]).await.is_err() {
                        break;
                    }
                    commits += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                commits
            })
        })
    };

    let browser = Browser::new(
        LaunchOptions::default_builder()
            .path(Some(browser_path))
            .headless(true)
            // Root in a container has no user namespace for Chromium's sandbox; the page is our own.
            .sandbox(false)
            .window_size(Some((1400, 1300)))
            .idle_browser_timeout(Duration::from_secs(180))
            .build()
            .expect("launch options"),
    )
    .expect("Chromium starts");
    let tab = browser.new_tab().expect("a tab");
    let errors = watch_errors(&tab);
    tab.set_default_timeout(Duration::from_secs(30));
    tab.navigate_to(&format!("http://{admin}/")).expect("navigates").wait_until_navigated().expect("loads");
    let long = Duration::from_secs(30);

    // The watch sees errors: a probe of each kind it must catch, then a clean slate.
    eval(&tab, "console.error('probe: console.error'); setTimeout(() => { throw new Error('probe: uncaught'); }); 1");
    let deadline = Instant::now() + long;
    while errors.lock().unwrap().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let probes = std::mem::take(&mut *errors.lock().unwrap());
    assert!(
        probes.iter().any(|e| e.contains("probe: console.error"))
            && probes.iter().any(|e| e.contains("probe: uncaught")),
        "the error watch missed a probe: {probes:?}"
    );

    // The cluster as the user thinks of it.
    wait_for(&tab, "document.body.dataset.rendered === 'yes'", "a first render of /status", long);
    assert_eq!(eval(&tab, "document.title"), "Causet console");
    assert!(text(&tab, "#where").starts_with("DC 0 of 3 · node 0 of 1 · 4 partitions"), "{}", text(&tab, "#where"));
    let dcs = eval(&tab, "[...document.querySelectorAll('#cluster g.dc')].map(g => g.dataset.dc).sort().join(',')");
    assert_eq!(dcs, "0,1,2", "the cluster drawing shows the three DCs");
    for dc in [1, 2] {
        wait_for(
            &tab,
            &format!("(document.querySelector('#links tr[data-dc=\"{dc}\"] .state') || {{}}).textContent === 'up'"),
            &format!("the link to DC {dc} up"),
            long,
        );
        let line = format!("!!document.querySelector('#cluster line.link.up[data-dc=\"{dc}\"]')");
        assert_eq!(eval(&tab, &line), true, "the drawing shows the link to DC {dc} up");
    }
    assert_eq!(eval(&tab, "document.querySelectorAll('#partitions tbody tr').length"), 4);
    assert_eq!(text(&tab, "#partitions tr[data-partition=\"3\"] td:nth-child(2)"), "n0", "one node serves all four");

    // Six live charts, fed by /series while the load runs.
    let charts = eval(&tab, "[...document.querySelectorAll('#charts .chart')].map(c => c.id).join(',')");
    assert_eq!(charts, "chart-throughput,chart-latency,chart-visibility,chart-stable,chart-backlog,chart-open");
    assert_eq!(eval(&tab, "document.querySelectorAll('#charts .chart canvas').length"), 6, "uPlot drew six charts");
    let last = |chart: &str, series: &str| {
        format!("(JSON.parse(document.querySelector('#chart-{chart}').dataset.last || '{{}}')[{series:?}] ?? -1)")
    };
    wait_for(&tab, "+document.querySelector('#chart-throughput').dataset.points >= 3", "three samples", long);
    wait_for(&tab, &format!("{} > 0", last("throughput", "commits/s")), "commits per second", long);
    wait_for(&tab, &format!("{} > 0", last("latency", "p99")), "a latency percentile", long);
    for dc in [1, 2] {
        wait_for(&tab, &format!("{} > 0", last("visibility", &format!("DC {dc}"))), "remote visibility", long);
    }
    screenshot(&tab, "console.png");

    // Read-only without the token.
    assert_eq!(eval(&tab, "document.body.dataset.mode"), "read-only");
    assert_eq!(eval(&tab, "[...document.querySelectorAll('#links button')].every(b => b.disabled)"), true);

    // With it: cut the link to DC 1 from the page, and see it at the node and on the page.
    tab.find_element("#token").expect("the token field").click().expect("focuses the field");
    tab.type_str(&file.admin_token).expect("types the token");
    tab.find_element("#unlock").expect("the unlock button").click().expect("unlocks");
    wait_for(&tab, "document.body.dataset.mode === 'operator'", "operator mode after the token", long);
    let cut = "#links tr[data-dc=\"1\"] button.cut";
    wait_for(&tab, &format!("!document.querySelector('{cut}').disabled"), "an enabled cut button", long);
    tab.find_element(cut).expect("the cut button").click().expect("cuts");
    wait_for(&tab, "document.querySelector('#links tr[data-dc=\"1\"] .state').textContent === 'cut'", "DC 1 cut", long);
    assert!(node_says_cut(admin, 1), "the node's /status shows the link to DC 1 cut");
    assert_eq!(eval(&tab, "!!document.querySelector('#cluster line.link.cut[data-dc=\"1\"]')"), true);
    assert_eq!(text(&tab, "#links tr[data-dc=\"2\"] .state"), "up", "only DC 1 was cut");
    wait_for(&tab, &format!("{} > 1500", last("visibility", "DC 1")), "DC 1's visibility growing", long);
    screenshot(&tab, "console-cut.png");

    let heal = "#links tr[data-dc=\"1\"] button.heal";
    wait_for(&tab, &format!("!document.querySelector('{heal}').disabled"), "an enabled heal button", long);
    tab.find_element(heal).expect("the heal button").click().expect("heals");
    wait_for(&tab, "document.querySelector('#links tr[data-dc=\"1\"] .state').textContent === 'up'", "DC 1 up", long);
    assert!(!node_says_cut(admin, 1), "the node's /status shows the link to DC 1 healed");
    wait_for(&tab, &format!("{} >= 0 && {0} < 1000", last("visibility", "DC 1")), "DC 1's visibility back", long);

    // A wrong token, in a tab of its own (the refused request is a network error in that tab's console, by
    // design): refused, and the page stays read-only.
    let other = browser.new_tab().expect("a second tab");
    other.navigate_to(&format!("http://{admin}/")).expect("navigates").wait_until_navigated().expect("loads");
    wait_for(&other, "document.body.dataset.rendered === 'yes'", "a first render", long);
    other.find_element("#token").expect("the token field").click().expect("focuses the field");
    other.type_str("not-the-token").expect("types");
    other.find_element("#unlock").expect("the unlock button").click().expect("submits");
    wait_for(&other, "document.querySelector('#banner').textContent.includes('token refused')", "the refusal", long);
    assert_eq!(eval(&other, "document.body.dataset.mode"), "read-only");

    stop.store(true, Ordering::Relaxed);
    let commits = load.join().expect("the load thread");
    assert!(commits > 100, "the load committed only {commits} transactions");
    let errors = errors.lock().unwrap().clone();
    assert!(errors.is_empty(), "the console logged errors: {errors:#?}");
}

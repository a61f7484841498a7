// Pages in headless Chromium (peers/browser.py over the DevTools protocol) talking to the
// real binary: the --devconsole page and a --static page, each sending and receiving
// messages through `wspipe -l ... --echo` (and binary ones from a program). Skipped, with
// one line, where chromium is not installed (scripts/setup installs it); failed under CI=true.
import Foundation
import Glibc
import TestSupport
import XCTest

final class BrowserTests: IntegrationTestCase {
    /// A promise that resolves with the console's event texts once one starts with `prefix`.
    private func consoleEvent(_ prefix: String) -> String {
        """
        new Promise((ok, no) => { const t0 = Date.now(); (function poll() {
          const e = window.wspipeConsole.events;
          if (e.some(x => x.text.startsWith(\(quoted(prefix))))) ok(e.map(x => x.kind + " " + x.text));
          else if (Date.now() - t0 > 15000) no(new Error("no event " + \(quoted(prefix)) + ": " + JSON.stringify(e)));
          else setTimeout(poll, 20); })(); })
        """
    }

    private func quoted(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast().description
    }

    func testTheDevConsoleSendsLinesAndShowsMessagesTypesAndTheClose() throws {
        let (server, port) = try startListening(["--echo", "--devconsole", "--path", "/chat"])
        let values = try browse("http://127.0.0.1:\(port)/chat?room=1", [
            "document.title + ' ' + [...document.querySelectorAll('script[src], link[href]')].length",
            consoleEvent("connected to ws://127.0.0.1:\(port)/chat?room=1"),
            "window.wspipeConsole.send('hello from the console'); true",
            consoleEvent("< text: hello from the console"),
            "window.wspipeConsole.close(4001, 'bye'); true",
            // The echo server answers a Close with its code (no reason).
            consoleEvent("closed: code 4001"),
        ])
        XCTAssertEqual(values.first as? String, "wspipe console 0", "no external script or style")
        let events = try XCTUnwrap(values.last as? [String])
        XCTAssertTrue(events.contains("out > text: hello from the console"), "\(events)")
        XCTAssertTrue(events.contains("in < text: hello from the console"), "\(events)")
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }

    func testTheDevConsoleShowsBinaryMessagesFromAProgram() throws {
        let (server, port) = try startListening(["--devconsole", "-b", "--sh", "printf 'AB\\001'; cat >/dev/null"])
        let values = try browse("http://127.0.0.1:\(port)/", [consoleEvent("< binary (3 bytes): 41 42 01")])
        XCTAssertEqual(values.count, 1)
        server.signal(SIGTERM)
        _ = finish(server)
    }

    func testAStaticPageExchangesTextAndBinaryMessagesThroughTheEchoServer() throws {
        let root = path("www")
        try FileManager.default.createDirectory(atPath: root + "/js", withIntermediateDirectories: true)
        let page = """
            <!DOCTYPE html><html><head><meta charset="utf-8"><title>page</title><script src="js/app.js"></script></head><body></body></html>
            """
        let script = """
            window.received = [];
            window.done = new Promise((ok, no) => {
              const ws = new WebSocket("ws://" + location.host + "/socket");
              ws.binaryType = "arraybuffer";
              ws.onopen = () => { ws.send("héllo"); ws.send(new Uint8Array([0, 1, 255]).buffer); };
              ws.onmessage = (e) => {
                window.received.push(typeof e.data === "string" ? "text:" + e.data : "binary:" + Array.from(new Uint8Array(e.data)).join(","));
                if (window.received.length === 2) ws.close(1000);
              };
              ws.onclose = (e) => ok(window.received.concat(["close:" + e.code]));
              ws.onerror = () => no(new Error("WebSocket error"));
              setTimeout(() => no(new Error("timed out: " + JSON.stringify(window.received))), 15000);
            });
            """
        try Data(page.utf8).write(to: URL(fileURLWithPath: root + "/index.html"))
        try Data(script.utf8).write(to: URL(fileURLWithPath: root + "/js/app.js"))
        let (server, port) = try startListening(["--echo", "--static", root])
        let values = try browse("http://127.0.0.1:\(port)/", ["document.title", "window.done"])
        XCTAssertEqual(values.first as? String, "page")
        XCTAssertEqual(values.last as? [String], ["text:héllo", "binary:0,1,255", "close:1000"])
        server.signal(SIGTERM)
        assertDiedOf(finish(server), SIGTERM)
    }
}

/// Pages in headless Chromium, for every integration test that needs a browser.
extension IntegrationTestCase {
    /// Each expression's JSON value, in order (browser.py's lines), on the page at `url`;
    /// without chromium, `Tool.chromium.absence()` (a skip, a failure under CI=true).
    func browse(_ url: String, _ expressions: [String], file: StaticString = #filePath, line: UInt = #line) throws -> [Any] {
        let child = try ChildProcess(executable: Locations.python,
                                     arguments: ["\(Locations.peers)/browser.py", "--timeout", "60", url] + expressions,
                                     environment: Locations.baseEnvironment, stdin: .null)
        let result = finish(child, timeout: 90)
        if result.exitCode == 77 { throw Tool.chromium.absence(file: file, line: line) }  // browser.py found no chromium
        XCTAssertEqual(result.exitCode, 0, result.stdoutText + result.stderr)
        let values = try result.stdoutText.split(separator: "\n").map { line -> Any in
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            if let error = object["error"] { XCTFail("in the page: \(error)\n\(result.stderr)") }
            return object["value"] ?? NSNull()
        }
        XCTAssertEqual(values.count, expressions.count, result.stdoutText + result.stderr)
        return values
    }
}

// The real client address behind a proxy: HAProxy (send-proxy-v2) and nginx
// (X-Forwarded-For) in front of wspipe, a client from 127.0.0.2, and what the program
// under --exec sees in REMOTE_ADDR; headers from an untrusted peer; bad PROXY headers.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ClientAddressTests: IntegrationTestCase {
    /// `wspipe -l 0 ARGS --exec` a program that sends "$REMOTE_ADDR $REMOTE_PORT".
    private func serveAddressProgram(_ arguments: [String]) throws -> (ChildProcess, Int) {
        let program = path("address.sh")
        try "#!/bin/sh\necho \"$REMOTE_ADDR $REMOTE_PORT\"\n".write(toFile: program, atomically: true, encoding: .utf8)
        chmod(program, 0o755)
        return try startListening(["-v"] + arguments + ["--exec", program])
    }

    /// client_address.py to its end; its stdout's last line.
    private func client(_ port: Int, bind: String? = "127.0.0.2", _ arguments: [String], timeout: Double = 60,
                        file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let child = try ChildProcess(executable: Locations.python,
                                     arguments: ["\(Locations.peers)/client_address.py", "--port", String(port)]
                                         + (bind.map { ["--bind", $0] } ?? []) + arguments,
                                     environment: Locations.baseEnvironment.merging(["PYTHONDONTWRITEBYTECODE": "1"]) { $1 })
        addTeardownBlock { child.kill() }
        let result = finish(child, timeout: timeout, file: file, line: line)
        XCTAssertEqual(result.exitCode, 0, "\(result)", file: file, line: line)
        return result.stdoutText.split(separator: "\n").last.map(String.init) ?? ""
    }

    /// A loopback port nothing listens on now (the proxy binds it next).
    private func freePort() throws -> Int {
        try LoopbackSocket(listening: false).port
    }

    /// Runs `executable ARGUMENTS` until the test ends, and waits for it to listen on `port`.
    private func startProxy(_ executable: String, _ arguments: [String], port: Int) throws -> ChildProcess {
        let child = try ChildProcess(executable: executable, arguments: arguments, environment: Locations.baseEnvironment)
        addTeardownBlock { child.kill() }
        guard waitForLoopbackListener(port: port) else {
            throw HarnessError("\(child.name) does not listen on \(port): \(child.stderr.text)")
        }
        return child
    }

    /// HAProxy in TCP mode in front of `port`, sending PROXY v2; its port.
    private func startHAProxy(to port: Int) throws -> Int {
        let haproxy = try Tool.haproxy.path()
        let front = try freePort()
        let config = path("haproxy.cfg")
        try """
        global
            maxconn 64
        defaults
            mode tcp
            timeout connect 5s
            timeout client 30s
            timeout server 30s
        frontend f
            bind 127.0.0.1:\(front)
            default_backend b
        backend b
            server s 127.0.0.1:\(port) send-proxy-v2

        """.write(toFile: config, atomically: true, encoding: .utf8)
        _ = try startProxy(haproxy, ["-db", "-f", config], port: front)
        return front
    }

    func testHAProxySendProxyV2GivesTheProgramTheClientsAddress() throws {
        let (server, port) = try serveAddressProgram(["--proxy-protocol", "--trust-proxy", "127.0.0.1/32"])
        let front = try startHAProxy(to: port)
        let answer = try client(front, ["ask"])
        XCTAssertTrue(answer.hasPrefix("MESSAGE 127.0.0.2 "), "\(answer); server: \(server.stderr.text)")
        XCTAssertNotNil(Int(answer.split(separator: " ").last ?? ""), "REMOTE_PORT is the client's: \(answer)")
        assertStderr(server, contains: "connected from 127.0.0.2:")
        // Straight to wspipe from 127.0.0.2, outside --trust-proxy: closed without an answer.
        XCTAssertEqual(try client(port, ["ask", "--prefix-hex", hex("PROXY TCP4 203.0.113.7 127.0.0.1 1 2\r\n")]), "CLOSED 0")
        assertStderr(server, contains: "connection from 127.0.0.2:")
        assertStderr(server, contains: "closed: not in --trust-proxy")
    }

    /// nginx in front of `port` (proxy_pass with the Upgrade headers, X-Forwarded-For added); its port.
    private func startNginx(to port: Int) throws -> Int {
        let nginx = try Tool.nginx.path()
        let front = try freePort()
        let prefix = path("nginx")
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        try """
        worker_processes 1;
        daemon off;
        pid \(prefix)/nginx.pid;
        error_log \(prefix)/error.log;
        events { worker_connections 64; }
        http {
            access_log off;
            client_body_temp_path \(prefix)/body;
            proxy_temp_path \(prefix)/proxy;
            fastcgi_temp_path \(prefix)/fastcgi;
            uwsgi_temp_path \(prefix)/uwsgi;
            scgi_temp_path \(prefix)/scgi;
            server {
                listen 127.0.0.1:\(front);
                location / {
                    proxy_pass http://127.0.0.1:\(port);
                    proxy_http_version 1.1;
                    proxy_set_header Upgrade $http_upgrade;
                    proxy_set_header Connection "upgrade";
                    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                }
            }
        }

        """.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
        _ = try startProxy(nginx, ["-p", prefix, "-c", prefix + "/nginx.conf", "-e", prefix + "/error.log"], port: front)
        return front
    }

    func testNginxXForwardedForGivesTheProgramTheClientsAddress() throws {
        let (server, port) = try serveAddressProgram(["--trust-proxy", "127.0.0.1/32"])
        let front = try startNginx(to: port)
        XCTAssertEqual(try client(front, ["ask"]), "MESSAGE 127.0.0.2 ", "X-Forwarded-For has no port: REMOTE_PORT is empty")
        // The client's own claim is left of what nginx adds: walked right to left, it is not believed.
        XCTAssertEqual(try client(front, ["ask", "--header", "X-Forwarded-For: 203.0.113.9"]), "MESSAGE 127.0.0.2 ")
        assertStderr(server, contains: "connected from 127.0.0.2 to /")
    }

    /// --max-clients-per-ip counts the PROXY header's address, not HAProxy's.
    func testPerAddressLimitAppliesToTheClientBehindHAProxy() throws {
        let (_, port) = try startListening(["--echo", "--proxy-protocol", "--trust-proxy", "127.0.0.1", "--max-clients-per-ip", "1"])
        let front = try startHAProxy(to: port)
        XCTAssertEqual(try client(front, bind: nil, ["hold", "--from", "127.0.0.2", "--from", "127.0.0.2", "--from", "127.0.0.3"]),
                       "STATUSES 101 429 101")
    }

    /// --max-clients-per-ip counts the address nginx names, not nginx's own: a second client
    /// from 127.0.0.2 gets 429, one from 127.0.0.3 is admitted.
    func testPerAddressLimitAppliesToTheClientBehindNginx() throws {
        let (_, port) = try startListening(["--echo", "--trust-proxy", "127.0.0.1", "--max-clients-per-ip", "1"])
        let front = try startNginx(to: port)
        XCTAssertEqual(try client(front, bind: nil, ["hold", "--from", "127.0.0.2", "--from", "127.0.0.2", "--from", "127.0.0.3"]),
                       "STATUSES 101 429 101")
    }

    func testHeadersFromAnUntrustedPeerAreNotRead() throws {
        let (server, port) = try serveAddressProgram([])
        for header in ["X-Forwarded-For: 203.0.113.9", "Forwarded: for=203.0.113.9"] {
            let answer = try client(port, ["ask", "--header", header])
            XCTAssertTrue(answer.hasPrefix("MESSAGE 127.0.0.2 "), "\(header): \(answer)")
        }
        server.signal(SIGTERM)
        _ = finish(server)
        // Trusting another range: 127.0.0.2 is still not a proxy.
        let (_, other) = try serveAddressProgram(["--trust-proxy", "10.0.0.0/8", "--client-address-header", "Forwarded"])
        XCTAssertTrue(try client(other, ["ask", "--header", "Forwarded: for=203.0.113.9"]).hasPrefix("MESSAGE 127.0.0.2 "))
    }

    func testTrustedForwardedAndOnlyTheChosenHeader() throws {
        let (_, port) = try serveAddressProgram(["--trust-proxy", "127.0.0.0/8", "--client-address-header", "Forwarded"])
        XCTAssertEqual(try client(port, ["ask", "--header", #"Forwarded: for="[2001:db8::17]:4711";proto=https"#]),
                       "MESSAGE 2001:db8::17 4711")
        XCTAssertTrue(try client(port, ["ask", "--header", "X-Forwarded-For: 203.0.113.9"]).hasPrefix("MESSAGE 127.0.0.2 "),
                      "X-Forwarded-For is not read when Forwarded is the header")
    }

    func testBadProxyHeadersAreClosedWithoutAnAnswer() throws {
        let (server, port) = try serveAddressProgram(["--proxy-protocol", "--trust-proxy", "127.0.0.0/8"])
        var unknownFamily: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x21, 0x51, 0x00, 0x0C]
        unknownFamily += [UInt8](repeating: 1, count: 12)
        XCTAssertEqual(try client(port, ["ask", "--prefix-hex", hex("PROXY TCP4 203.0.113.7 127.0.0.1 5555\r\n")]), "CLOSED 0")
        XCTAssertEqual(try client(port, ["ask", "--prefix-hex", unknownFamily.map { String(format: "%02x", $0) }.joined()]), "CLOSED 0")
        XCTAssertEqual(try client(port, ["ask"]), "CLOSED 0", "no header at all")
        XCTAssertEqual(try client(port, ["ask", "--prefix-hex", hex("PROXY UNKNOWN\r\n")]).prefix(18), "MESSAGE 127.0.0.2 ")
        assertStderr(server, contains: "closed: malformed PROXY v1 line: 3 fields after TCP4, not 4")
        assertStderr(server, contains: "closed: PROXY v2 family/protocol 0x51 is not one we know")
        assertStderr(server, contains: "closed: no PROXY protocol header")
    }

    /// The PROXY header comes before TLS: the bytes after it are the TLS handshake's.
    func testProxyHeaderBeforeTLS() throws {
        let tls = try TLSMaterial.shared()
        let program = path("address.sh")
        try "#!/bin/sh\necho \"$REMOTE_ADDR $REMOTE_PORT $HTTPS\"\n".write(toFile: program, atomically: true, encoding: .utf8)
        chmod(program, 0o755)
        let (_, port) = try startListening(["--cert", tls.serverCert, "--key", tls.serverKey, "--proxy-protocol",
                                            "--exec", program], scheme: "wss")
        XCTAssertEqual(try client(port, ["ask", "--tls", tls.caCert, "--prefix-hex", hex("PROXY TCP6 2001:db8::5 ::1 4711 443\r\n")]),
                       "MESSAGE 2001:db8::5 4711 on")
    }

    /// A Unix-socket listener: no address without a PROXY header, the header's with one;
    /// `--trust-proxy unix` lets its peers send X-Forwarded-For.
    func testUnixListenerGetsItsAddressFromTheProxy() throws {
        let program = path("address.sh")
        try "#!/bin/sh\necho \"[$REMOTE_ADDR] [$REMOTE_PORT]\"\n".write(toFile: program, atomically: true, encoding: .utf8)
        chmod(program, 0o755)
        let socket = path("ws.sock"), proxied = path("proxied.sock")
        let plain = try spawnWspipe(["-l", "unix:" + socket, "--trust-proxy", "unix", "--exec", program], stdin: .null)
        let withHeader = try spawnWspipe(["-l", "unix:" + proxied, "--proxy-protocol", "--trust-proxy", "unix", "--exec", program], stdin: .null)
        for child in [plain, withHeader] {
            XCTAssertNotNil(child.stderr.waitForLine(startingWith: "wspipe: listening on ws+unix://", timeout: 15), child.stderr.text)
        }
        XCTAssertEqual(try client(0, bind: nil, ["ask", "--unix", socket]), "MESSAGE [] []")
        XCTAssertEqual(try client(0, bind: nil, ["ask", "--unix", socket, "--header", "X-Forwarded-For: 203.0.113.4"]),
                       "MESSAGE [203.0.113.4] []")
        XCTAssertEqual(try client(0, bind: nil, ["ask", "--unix", proxied, "--prefix-hex", hex("PROXY TCP4 203.0.113.7 10.0.0.1 5555 80\r\n")]),
                       "MESSAGE [203.0.113.7] [5555]")
        XCTAssertEqual(try client(0, bind: nil, ["ask", "--unix", proxied, "--prefix-hex", hex("PROXY UNKNOWN\r\n")]), "MESSAGE [] []")
    }

    /// 1,000 bad connections (cut and malformed PROXY headers, an unknown v2 family, 16 KiB
    /// of X-Forwarded-For): little memory and CPU for the server. The issue's 0.5 s is for a
    /// release binary (measured 0.09-0.10 s, RSS +148 KiB, WSPIPE_BIN=.build/release/wspipe);
    /// the debug binary the tests run by default takes 0.46-0.55 s (its 16 KiB heads are
    /// most of it), so it gets three times that.
    func testAThousandBadConnectionsCostLittle() throws {
        let (server, port) = try startListening(["--echo", "--proxy-protocol", "--trust-proxy", "127.0.0.0/8", "--trust-proxy", "10.0.0.0/8"])
        // A first round warms the allocator up; the second is measured.
        XCTAssertEqual(try client(port, ["bad", "--count", "100"]), "DONE closed=80 upgraded=20 other=0")
        let rssBefore = try residentKiB(of: server.pid), cpuBefore = try cpuSeconds(server.pid)
        XCTAssertEqual(try client(port, ["bad", "--count", "1000"], timeout: 120), "DONE closed=800 upgraded=200 other=0")
        let rss = try residentKiB(of: server.pid) - rssBefore, cpu = try cpuSeconds(server.pid) - cpuBefore
        print("1000 bad connections: RSS +\(rss) KiB, CPU \(String(format: "%.3f", cpu)) s")
        XCTAssertLessThan(rss, 4 * 1024, "RSS grew \(mebibytes(rss))")
        let limit = Locations.wspipe.contains("/debug/") ? 1.5 : 0.5
        XCTAssertLessThan(cpu, limit, "CPU \(cpu) s (\(Locations.wspipe))")
    }

    /// The server's -v lines come through a pipe read on another thread: wait for `text`.
    private func assertStderr(_ server: ChildProcess, contains text: String, file: StaticString = #filePath, line: UInt = #line) {
        let found = server.stderr.wait(timeout: 10) { String(decoding: $0, as: UTF8.self).contains(text) }
        XCTAssertTrue(found, "no '\(text)' in: \(server.stderr.text)", file: file, line: line)
    }

    private func hex(_ text: String) -> String { text.utf8.map { String(format: "%02x", $0) }.joined() }
}

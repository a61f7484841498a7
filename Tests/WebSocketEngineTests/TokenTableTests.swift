import Glibc
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

final class TokenTableTests: XCTestCase {
    func parse(_ text: String) -> Result<TokenTable, TokenTable.Mistake> { TokenTable.parse(Array(text.utf8)) }

    func testWebsockifysFormatAndOurTargets() throws {
        let table = try parse("# comment\n\nvnc1: 127.0.0.1:5900\r\nssh:\t[::1]:22\n  app : unix:/run/app.sock  \nweb: tcp:h.example:80\n").get()
        XCTAssertEqual(table.targets, ["vnc1": .tcp(HostPort(host: "127.0.0.1", port: 5900)), "ssh": .tcp(HostPort(host: "::1", port: 22)),
                                       "app": .unix(path: "/run/app.sock"), "web": .tcp(HostPort(host: "h.example", port: 80))])
    }

    func testMistakesNameTheirLine() {
        XCTAssertEqual(parse("a: 1.2.3.4:5\nbroken\n"), .failure(.init(line: 2, problem: "expected 'TOKEN: HOST:PORT'")))
        XCTAssertEqual(parse("a: 1.2.3.4:5\na: 1.2.3.4:6\n"), .failure(.init(line: 2, problem: "the token is given twice")))
        XCTAssertEqual(parse(": 1.2.3.4:5\n"), .failure(.init(line: 1, problem: "the token is empty")))
        XCTAssertEqual(parse("a: nowhere\n"), .failure(.init(line: 1, problem: "'nowhere' is not HOST:PORT, tcp:HOST:PORT or unix:PATH")))
        XCTAssertEqual(parse("a: unix:/x\r\r\n"), .failure(.init(line: 1, problem: "'unix:/x?' is not HOST:PORT, tcp:HOST:PORT or unix:PATH")),
                       "a control byte is no part of a path (found by fuzz/targets/tokens.swift)")
    }

    func testTheRequestsTokenFromTheQueryThenTheCookie() {
        XCTAssertEqual(TokenTable.token(query: "a=1&token=ab%2Fc", cookies: ["token=other"]), "ab/c")
        XCTAssertEqual(TokenTable.token(query: "a=1", cookies: ["x=1; token=fromcookie"]), "fromcookie")
        XCTAssertNil(TokenTable.token(query: nil, cookies: []))
        XCTAssertNil(TokenTable.token(query: "mytoken=1", cookies: ["xtoken=2"]))
    }

    func testTheFileIsReadAgainWhenItChangesAndABadOneKeepsTheLastTable() throws {
        let path = "/tmp/wspipe-tokens-\(getpid()).conf"
        defer { unlink(path) }
        func write(_ text: String, mode: mode_t = 0o600) {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
            _ = text.withCString { Glibc.write(fd, $0, strlen($0)) }
            close(fd)
            chmod(path, mode)
        }
        write("a: 127.0.0.1:1\n")
        let file = try TokenFile(path: path)
        var mistakes: [String] = []
        file.onMistake = { _, line, problem in mistakes.append("\(line): \(problem)") }
        XCTAssertEqual(file.target(for: "a"), .tcp(HostPort(host: "127.0.0.1", port: 1)))
        write("a: 127.0.0.1:1\nb: 127.0.0.1:22\n")
        XCTAssertEqual(file.target(for: "b"), .tcp(HostPort(host: "127.0.0.1", port: 22)))
        write("a: 127.0.0.1:1\nb is gone\nc: 127.0.0.1:3\n")
        XCTAssertEqual(file.target(for: "b"), .tcp(HostPort(host: "127.0.0.1", port: 22)), "the last good table")
        XCTAssertNil(file.target(for: "c"))
        XCTAssertEqual(mistakes, ["2: expected 'TOKEN: HOST:PORT'; keeping the last good table"], "said once per change")
        write("a: 127.0.0.1:1\n", mode: 0o666)
        XCTAssertThrowsError(try TokenFile(path: path)) { error in
            guard case TokenFile.OpenError.writableByOthers = error else { return XCTFail("\(error)") }
        }
    }
}

// RequestPath: a request target's path as plain segments, decoded once, or why not.
import XCTest
@testable import WebSocketCore

final class RequestPathTests: XCTestCase {
    private func segments(_ target: String) throws -> [String] {
        try RequestPath(target: target).segments.map { String(decoding: $0, as: UTF8.self) }
    }

    private func refusal(_ target: String) -> RequestPath.Refusal? {
        do { _ = try RequestPath(target: target); return nil } catch { return error }
    }

    func testPlainPathsSplitIntoDecodedSegments() throws {
        XCTAssertEqual(try segments("/"), [])
        XCTAssertEqual(try segments("/count"), ["count"])
        XCTAssertEqual(try segments("/sub/deep/x?a=1/../b"), ["sub", "deep", "x"])
        XCTAssertEqual(try segments("/a%20b/%E2%82%AC"), ["a b", "€"])
        XCTAssertEqual(try segments("/a.b/c..d/e."), ["a.b", "c..d", "e."])
        XCTAssertTrue(try RequestPath(target: "/dir/").hasTrailingSlash)
        XCTAssertFalse(try RequestPath(target: "/dir").hasTrailingSlash)
        XCTAssertTrue(try RequestPath(target: "/").hasTrailingSlash)
    }

    /// RFC 9112 §3.2.2: a server MUST accept the absolute-form. Its path goes through the
    /// same rules; the authority names no file.
    func testAnAbsoluteFormTargetIsItsPath() throws {
        XCTAssertEqual(try segments("http://127.0.0.1:8080/sub/a.txt?x=1"), ["sub", "a.txt"])
        XCTAssertEqual(try segments("HTTPS://h"), [])
        XCTAssertEqual(try segments("ws://h?q=/etc"), [])
        XCTAssertTrue(try RequestPath(target: "http://h").hasTrailingSlash)
        XCTAssertFalse(try RequestPath(target: "http://h/dir").hasTrailingSlash)
        XCTAssertEqual(try segments("http://h/a%20b"), ["a b"])
        XCTAssertEqual(refusal("http://h/../etc/passwd"), .dotSegment)
        XCTAssertEqual(refusal("http://h/.env"), .dotfile(".env"))
        XCTAssertEqual(refusal("http://h//etc/passwd"), .emptySegment)
        XCTAssertEqual(refusal("http://h/a%2f..%2fb"), .encodedSlash)
        // The authority's bytes are not a path: "/" in it ends it, so nothing there is looked up.
        XCTAssertEqual(try segments("http://..%2f..@h/x"), ["x"])
    }

    func testTheTargetsFormsAsTheServerReadsThem() {
        let forms: [(target: String, origin: String, path: String)] = [
            ("/a?b", "/a?b", "/a"), ("http://h:1/a?b", "/a?b", "/a"), ("wss://[::1]:8443", "/", "/"), ("http://h?q", "/?q", "/"),
            ("svn+ssh.1-x://h/p", "/p", "/p"), ("/metrics", "/metrics", "/metrics"),
        ]
        for form in forms {
            XCTAssertEqual(RequestTarget.originForm(form.target).map(String.init), form.origin, form.target)
            XCTAssertEqual(RequestTarget.path(form.target).map(String.init), form.path, form.target)
        }
        for other in ["", "*", "a", "host:80", "http://", "http:///x", "http://?q", "1http://h/x", "a/b://h/x", "-x://h/",
                      "http:/h/x", "://h/x"] {
            XCTAssertNil(RequestTarget.originForm(other), other)
            XCTAssertNil(RequestTarget.path(other), other)
        }
    }

    func testDecodedExactlyOnce() throws {
        // %252e is "%2e" after one decoding: a literal name, not "."
        XCTAssertEqual(try segments("/%252e%252e/x"), ["%2e%2e", "x"])
        XCTAssertEqual(try segments("/%25"), ["%"])
    }

    func testDotSegmentsInEverySpellingAreRefused() {
        for target in ["/..", "/a/../b", "/./a", "/a/.", "/%2e%2e/x", "/%2E%2E", "/.%2e/x", "/%2e", "/a/%2e/b", "/a/..?q"] {
            XCTAssertEqual(refusal(target), .dotSegment, target)
        }
    }

    func testEachOtherFormHasItsOwnRefusal() {
        XCTAssertEqual(refusal("count"), .notAbsolute)
        XCTAssertEqual(refusal("*"), .notAbsolute)
        XCTAssertEqual(refusal(""), .notAbsolute)
        XCTAssertEqual(refusal("host:443"), .notAbsolute)
        XCTAssertEqual(refusal("http:///x"), .notAbsolute)
        XCTAssertEqual(refusal("/a\\b"), .backslash)
        XCTAssertEqual(refusal("/a%5cb"), .backslash)
        XCTAssertEqual(refusal("/..%5c..%5cetc"), .backslash)
        XCTAssertEqual(refusal("/a%00b"), .nul)
        XCTAssertEqual(refusal("/a\u{0}b"), .nul)
        XCTAssertEqual(refusal("/a%0d%0aX: y"), .controlByte)
        XCTAssertEqual(refusal("/a%7f"), .controlByte)
        XCTAssertEqual(refusal("/a%2fb"), .encodedSlash)
        XCTAssertEqual(refusal("/a%2F..%2Fb"), .encodedSlash)
        XCTAssertEqual(refusal("//etc/passwd"), .emptySegment)
        XCTAssertEqual(refusal("/a//b"), .emptySegment)
        XCTAssertEqual(refusal("/.git/config"), .dotfile(".git"))
        XCTAssertEqual(refusal("/a/.env"), .dotfile(".env"))
        XCTAssertEqual(refusal("/a/%2ehidden"), .dotfile(".hidden"))
        XCTAssertEqual(refusal("/a%"), .invalidPercentEncoding(offset: 2))
        XCTAssertEqual(refusal("/a%2"), .invalidPercentEncoding(offset: 2))
        XCTAssertEqual(refusal("/a%zz"), .invalidPercentEncoding(offset: 2))
        XCTAssertEqual(refusal("/%%32%65"), .invalidPercentEncoding(offset: 1))
    }

    func testRefusalsSayWhyOnOneLine() {
        let all: [RequestPath.Refusal] = [.notAbsolute, .invalidPercentEncoding(offset: 3), .dotSegment, .backslash, .nul,
                                          .controlByte, .encodedSlash, .emptySegment, .dotfile(".a\n\u{7}b")]
        for refusal in all {
            XCTAssertFalse(refusal.description.isEmpty)
            XCTAssertFalse(refusal.description.utf8.contains { $0 < 0x20 }, refusal.description)
        }
    }

    func testPrefixAndSuffixAreScriptNameAndPathInfo() throws {
        let path = try RequestPath(target: "/sub/deep/x")
        XCTAssertEqual(String(decoding: path.prefix(2), as: UTF8.self), "/sub/deep")
        XCTAssertEqual(String(decoding: path.suffix(from: 2), as: UTF8.self), "/x")
        XCTAssertEqual(String(decoding: path.suffix(from: 3), as: UTF8.self), "")
        XCTAssertEqual(String(decoding: path.prefix(0), as: UTF8.self), "/")
        let trailing = try RequestPath(target: "/count/a%20b/")
        XCTAssertEqual(String(decoding: trailing.prefix(1), as: UTF8.self), "/count")
        XCTAssertEqual(String(decoding: trailing.suffix(from: 1), as: UTF8.self), "/a b/")
    }
}

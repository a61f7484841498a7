// --expect / --until patterns without sockets: regular expressions (glibc, NUL-safe, one
// pass), JSON fields (paths, values, JSON's equality with exact numbers), the 1 MiB cut and
// the usage errors a shell user reads.
import XCTest
@testable import WSPipeBridge

final class MessagePatternTests: XCTestCase {
    private func regex(_ source: String) throws -> MessagePattern { try MessagePattern.regex(source) }
    private func json(_ spec: String) throws -> MessagePattern { try MessagePattern.jsonField(spec) }

    private func regexFault(_ source: String) -> String? {
        do { _ = try MessagePattern.regex(source); return nil } catch { return error.description }
    }

    private func jsonFault(_ spec: String) -> String? {
        do { _ = try MessagePattern.jsonField(spec); return nil } catch { return error.description }
    }

    // MARK: regular expressions

    func testRegexIsSearchedNotAnchored() throws {
        let ready = try regex("rea+dy")
        XCTAssertTrue(ready.matches(text: Array("server is reaady now".utf8)))
        XCTAssertFalse(ready.matches(text: Array("server is redy".utf8)))
        XCTAssertEqual(ready.description, "rea+dy")
    }

    func testAnchorsAreTheWholePayloadsEnds() throws {
        let cases: [(pattern: String, payload: String, matches: Bool)] = [
            ("^ok$", "ok", true), ("^ok$", "not ok", false),
            ("^ok", "x\nok", false), ("x|^ok", "a\nok", false),  // the payload's start, not a line's
            ("ok$", "ok\n", false), ("(^a|b)c", "xbc", true), ("(^a|b)c", "xac", false),
            ("[^a]b", "xb", true), ("[^a]b", "ab", false),  // a ^ in brackets is no anchor
            ("a\\^", "a^", true),  // nor an escaped one
        ]
        for (pattern, payload, matches) in cases {
            XCTAssertEqual(try regex(pattern).matches(text: Array(payload.utf8)), matches, "\(pattern) in \(payload.debugDescription)")
        }
    }

    func testPayloadWithNULBytesIsSearchedToItsEnd() throws {
        let cases: [(pattern: String, payload: String, matches: Bool)] = [
            ("ready", "x\u{0}y ready", true), ("y r", "\u{0}\u{0}y ready", true), ("^y", "\u{0}y", false),
            ("x[^a]y", "x\u{0}y", true), ("^.*$", "", true),
        ]
        for (pattern, payload, matches) in cases {
            XCTAssertEqual(try regex(pattern).matches(text: Array(payload.utf8)), matches, "\(pattern) in \(payload.debugDescription)")
        }
    }

    func testUTF8TextMatchesItself() throws {
        XCTAssertTrue(try regex("café +ouvert").matches(text: Array("le café  ouvert".utf8)))
        XCTAssertTrue(try regex("→ ✓$").matches(text: Array("step → ✓".utf8)))
        XCTAssertFalse(try regex("cafe").matches(text: Array("café".utf8)))
    }

    func testCatastrophicLookingPatternIsOnePass() throws {
        // Tried at every start position (plain regexec), 1 MiB of "a" takes about half an hour.
        let payload = [UInt8](repeating: UInt8(ascii: "a"), count: MessagePattern.examinedBytes)
        let started = ContinuousClock.now
        XCTAssertFalse(try regex("(a|aa)*c").matches(text: payload))
        XCTAssertFalse(try regex("(x+x+)+y").matches(text: payload))
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2))
    }

    func testOnlyTheFirstMebibyteIsExamined() throws {
        let marker = try regex("MARK")
        var payload = [UInt8](repeating: UInt8(ascii: "."), count: MessagePattern.examinedBytes - 4)
        XCTAssertTrue(marker.matches(text: payload + Array("MARK".utf8)), "ending exactly at 1 MiB")
        payload.append(UInt8(ascii: "."))
        XCTAssertFalse(marker.matches(text: payload + Array("MARK".utf8)), "one byte past 1 MiB")
    }

    func testCutFallsOnACharacterBoundary() {
        // "é" (C3 A9) straddling the 1 MiB mark is left out whole, not cut after its lead byte.
        let payload = [UInt8](repeating: UInt8(ascii: "a"), count: MessagePattern.examinedBytes - 1) + [0xC3, 0xA9, 0x41]
        payload.withUnsafeBytes { whole in
            let examined = MessagePattern.examined(whole)
            XCTAssertEqual(examined.count, MessagePattern.examinedBytes - 1)
            XCTAssertNotNil(String(validating: examined, as: UTF8.self))
        }
        let small = Array("é".utf8)
        small.withUnsafeBytes { XCTAssertEqual(MessagePattern.examined($0).count, 2) }
    }

    func testBackReferenceIsRefused() {
        XCTAssertEqual(regexFault("(a)\\1"), "--expect '(a)\\1': back-references (\\1) are not supported")
        XCTAssertNotNil(regexFault("(a)(b)\\2"))
        // Inside a bracket expression a backslash is literal, and an escaped backslash is no reference.
        XCTAssertNil(regexFault("[\\1]"))
        XCTAssertTrue(try regex("[\\1]x").matches(text: Array("1x".utf8)))
        XCTAssertNil(regexFault("a\\\\1"))
        XCTAssertNil(regexFault("[]\\1]"))
        XCTAssertNil(regexFault("[[:alpha:]\\1]"))
    }

    func testBadRegexSaysWhatGlibcSays() {
        XCTAssertEqual(regexFault("a("), "--expect 'a(': bad regular expression: unmatched ( or \\(")
        XCTAssertEqual(regexFault("*a"), "--expect '*a': bad regular expression: invalid preceding regular expression")
        XCTAssertEqual(regexFault("[a"), "--expect '[a': bad regular expression: unmatched [, [^, [:, [., or [=")
        XCTAssertEqual(regexFault("a\\"), "--expect 'a\\': bad regular expression: trailing backslash")
        XCTAssertEqual(MessagePatternError(option: "--expect", pattern: "a(", fault: "x").given(as: "--until").description,
                       "--until 'a(': x")
    }

    func testUnmatchedCloseIsRefusedSinceItWouldEndTheSearchGroup() throws {
        // glibc reads `a)|b` as "a)" or "b"; inside ^(.|[^.])*( … ) it would end the group early.
        XCTAssertEqual(regexFault("a)|b"), "--expect 'a)|b': bad regular expression: unmatched ) (write \\) for a literal parenthesis)")
        XCTAssertTrue(try regex("a\\)|b").matches(text: Array("b".utf8)))
        XCTAssertTrue(try regex("a[)]").matches(text: Array("a)".utf8)))
        XCTAssertTrue(try regex("a|b").matches(text: Array("b".utf8)), "an alternation stays inside the group")
        XCTAssertFalse(try regex("^a|^b").matches(text: Array("cb".utf8)))
    }

    func testRepeatsOfRepeatsAreRefusedBeforeCompiling() throws {
        // glibc copies the operand of + and {m,n}: d with 20 +'s took 0.8 s to compile, 110 forever.
        let started = ContinuousClock.now
        let tooLarge = "bad regular expression: too large with its repeats expanded (over 2000 positions, where x{N} counts N times x)"
        for pattern in ["d" + String(repeating: "+", count: 110), "a{2001}", "(a{50}){50}", "(ab{9}){2,200}", "((a+)+)" + String(repeating: "+", count: 12)] {
            XCTAssertEqual(regexFault(pattern), "--expect '\(pattern)': \(tooLarge)")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
        XCTAssertTrue(try regex("a{1000}").matches(text: [UInt8](repeating: UInt8(ascii: "a"), count: 1000)))
        XCTAssertTrue(try regex("(ab){3,}x").matches(text: Array("abababx".utf8)))
        XCTAssertNil(regexFault("(a{40}){40}"))
        XCTAssertNil(regexFault("d+++++++"))
    }

    // MARK: JSON paths

    private func steps(_ spec: String) throws -> [JSONFieldPattern.Step] { try JSONFieldPattern(spec).path }

    func testPathSteps() throws {
        XCTAssertEqual(try steps("result.items[0].id=1"), [.key("result"), .key("items"), .index(0), .key("id")])
        XCTAssertEqual(try steps("[2]=1"), [.index(2)])
        XCTAssertEqual(try steps("[2][10]=1"), [.index(2), .index(10)])
        XCTAssertEqual(try steps("\"a.b\".c=1"), [.key("a.b"), .key("c")])
        XCTAssertEqual(try steps("\"x=y\"=1"), [.key("x=y")])
        XCTAssertEqual(try steps("\"q\\\"\\\\\"=1"), [.key("q\"\\")])
        XCTAssertEqual(try steps("\"\"=1"), [.key("")], "an empty key, quoted")
        XCTAssertEqual(try steps("été.π=1"), [.key("été"), .key("π")])
    }

    func testSplitAtTheFirstEqualsOutsideQuotes() throws {
        let field = try JSONFieldPattern("\"a=b\"=c=d")
        XCTAssertEqual(field.path, [.key("a=b")])
        XCTAssertEqual(field.value, .string("c=d"))
    }

    func testPathFaultsNameTheColumn() {
        XCTAssertEqual(jsonFault("a..b=1"), "--expect-json 'a..b=1': empty key at column 3 of the path")
        XCTAssertEqual(jsonFault("a.=1"), "--expect-json 'a.=1': empty key at column 3 of the path")
        XCTAssertEqual(jsonFault(".a=1"), "--expect-json '.a=1': empty key at column 1 of the path")
        XCTAssertEqual(jsonFault("=1"), "--expect-json '=1': empty path at column 1 of the path")
        XCTAssertEqual(jsonFault("id"), "--expect-json 'id': no '=' between PATH and VALUE (write PATH=VALUE)")
        XCTAssertEqual(jsonFault("a[x]=1"), "--expect-json 'a[x]=1': expected an index (digits) after '[' at column 3 of the path")
        XCTAssertEqual(jsonFault("a[1=1"), "--expect-json 'a[1=1': expected ']' after the index at column 4 of the path")
        XCTAssertEqual(jsonFault("a[]=1"), "--expect-json 'a[]=1': expected an index (digits) after '[' at column 3 of the path")
        XCTAssertEqual(jsonFault("a.[0]=1"), "--expect-json 'a.[0]=1': expected a key after '.', found '[' at column 3 of the path")
        XCTAssertEqual(jsonFault("\"a\"b=1"), "--expect-json '\"a\"b=1': expected '.', '[' or '=' after a key or index at column 4 of the path")
        XCTAssertEqual(jsonFault("\"ab=1"), "--expect-json '\"ab=1': unterminated quoted key at column 1 of the path")
        XCTAssertEqual(jsonFault("\"a\\nb\"=1"), "--expect-json '\"a\\nb\"=1': only \\\" and \\\\ are escapes in a quoted key at column 3 of the path")
        XCTAssertEqual(jsonFault("a]=1"), "--expect-json 'a]=1': unexpected ']' (quote a key that holds one) at column 2 of the path")
        XCTAssertEqual(jsonFault("[99999999999999999999]=1"), "--expect-json '[99999999999999999999]=1': index too large at column 2 of the path")
        XCTAssertEqual(jsonFault("é..b=1"), "--expect-json 'é..b=1': empty key at column 3 of the path", "columns count characters")
    }

    func testAPathDeeperThanAMessageMayNestIsRefused() throws {
        let deepest = Array(repeating: "[0]", count: 63).joined()
        let payload = Array(repeating: "[", count: 63).joined() + "7" + Array(repeating: "]", count: 63).joined()
        XCTAssertTrue(try MessagePattern.jsonField(deepest + "=7").matches(text: Array(payload.utf8)))
        XCTAssertEqual(jsonFault(deepest + "[0]=7"),
                       "--expect-json '\(deepest)[0]=7': more than 63 steps (messages nest at most 64 levels) at column 193 of the path")
    }

    // MARK: JSON values and matching

    func testValueIsJSONOrElseAString() throws {
        XCTAssertEqual(try JSONFieldPattern("a=7").value, .number(JSONNumber(text: "7")))
        XCTAssertEqual(try JSONFieldPattern("a=\"7\"").value, .string("7"))
        XCTAssertEqual(try JSONFieldPattern("a=true").value, .bool(true))
        XCTAssertEqual(try JSONFieldPattern("a=null").value, .null)
        XCTAssertEqual(try JSONFieldPattern("event=authenticated").value, .string("authenticated"))
        XCTAssertEqual(try JSONFieldPattern("a=").value, .string(""))
        XCTAssertEqual(try JSONFieldPattern("a={\"b\":").value, .string("{\"b\":"))
        XCTAssertTrue(try json("id=7").matches(text: Array("{\"id\":7}".utf8)))
        XCTAssertFalse(try json("id=7").matches(text: Array("{\"id\":\"7\"}".utf8)), "7 is a number, not the string \"7\"")
        XCTAssertTrue(try json("id=\"7\"").matches(text: Array("{\"id\":\"7\"}".utf8)))
        XCTAssertTrue(try json("event=authenticated").matches(text: Array("{\"event\":\"authenticated\"}".utf8)))
        XCTAssertFalse(try json("ok=true").matches(text: Array("{\"ok\":\"true\"}".utf8)))
        XCTAssertTrue(try json("error=null").matches(text: Array("{\"error\":null}".utf8)))
        XCTAssertFalse(try json("error=null").matches(text: Array("{}".utf8)), "a missing member is not null")
    }

    func testNumbersCompareAsExactDecimals() throws {
        let reply = Array("{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"result\":1}".utf8)
        XCTAssertTrue(try json("id=9007199254740993").matches(text: reply))
        XCTAssertFalse(try json("id=9007199254740992").matches(text: reply), "2^53 and 2^53+1 are one Double")
        for (a, b) in [("1.0", "1"), ("1e0", "1"), ("10e-1", "1"), ("-0", "0"), ("0.0e5", "-0"), ("100", "1E2"),
                       ("0.00120", "1.2e-3"), ("-1.5", "-15e-1"), ("123456789012345678901234567890", "1.23456789012345678901234567890e29")] {
            XCTAssertEqual(JSONNumber(text: a), JSONNumber(text: b), "\(a) = \(b)")
            XCTAssertTrue(try json("n=\(a)").matches(text: Array("{\"n\":\(b)}".utf8)), "\(a) matches \(b)")
        }
        for (a, b) in [("1", "-1"), ("1", "10"), ("0.1", "1"), ("12", "21"), ("1e400", "1e401"), ("1.0000000000000001", "1")] {
            XCTAssertNotEqual(JSONNumber(text: a), JSONNumber(text: b), "\(a) ≠ \(b)")
        }
        XCTAssertEqual(JSONNumber(text: "0.00120").digits, Array("12".utf8))
        XCTAssertEqual(JSONNumber(text: "0.00120").exponent, -4)
        XCTAssertEqual(JSONNumber(text: "-1200").exponent, 2)
        XCTAssertTrue(JSONNumber(text: "-1200").negative)
        XCTAssertEqual(JSONNumber(text: "1e99999999999999999999999").outOfRange, true)
        XCTAssertNotEqual(JSONNumber(text: "1e99999999999999999999999"), JSONNumber(text: "1e99999999999999999999998"))
        XCTAssertEqual(JSONNumber(text: "0e99999999999999999999999"), JSONNumber(text: "0"))
    }

    func testObjectsAndArraysCompareByMeaning() throws {
        let message = Array("{\"result\": {\"b\": [1, {\"y\": 2, \"x\": 1}], \"a\": \"s\"}}".utf8)
        XCTAssertTrue(try json("result={\"a\":\"s\",\"b\":[1.0,{\"x\":1,\"y\":2e0}]}").matches(text: message))
        XCTAssertFalse(try json("result={\"a\":\"s\",\"b\":[{\"x\":1,\"y\":2},1]}").matches(text: message), "array order counts")
        XCTAssertFalse(try json("result={\"a\":\"s\"}").matches(text: message), "a member fewer")
        XCTAssertFalse(try json("result={\"a\":\"s\",\"b\":[1,{\"x\":1,\"y\":2}],\"c\":1}").matches(text: message), "a member more")
        XCTAssertTrue(try json("result.b[1].y=2").matches(text: message))
        XCTAssertTrue(try json("[1]=[1,2]").matches(text: Array("[0,[1,2]]".utf8)))
        XCTAssertTrue(try json("a={\"k\":2}").matches(text: Array("{\"a\":{\"k\":1,\"k\":2}}".utf8)), "the last of a repeated name")
    }

    func testStringsCompareAfterUnescaping() throws {
        let cases: [(spec: String, message: String, matches: Bool)] = [
            ("s=\"é\\n\"", "{\"s\":\"\\u00e9\\u000a\"}", true),
            ("s=\"😀\"", "{\"s\":\"\\ud83d\\ude00\"}", true),
            ("\"a/b\"=1", "{\"a\\/b\":1}", true),
            // No canonical equivalence: a precomposed "é" is not "e" with a combining accent.
            ("s=\"é\"", "{\"s\":\"e\\u0301\"}", false),
            ("\"é\"=1", "{\"e\\u0301\":1}", false),
        ]
        for (spec, message, matches) in cases {
            XCTAssertEqual(try json(spec).matches(text: Array(message.utf8)), matches, "\(spec) on \(message)")
        }
    }

    func testWhatDoesNotMatch() throws {
        let id = try json("id=1")
        XCTAssertFalse(id.matches(text: Array("id=1".utf8)), "not JSON")
        XCTAssertFalse(id.matches(text: Array("{\"id\":1".utf8)), "cut short")
        XCTAssertFalse(id.matches(text: Array("{\"id\":1} x".utf8)), "text after the value")
        XCTAssertFalse(id.matches(text: Array("{\"other\":1}".utf8)), "no such member")
        XCTAssertFalse(id.matches(text: Array("[1]".utf8)), "not an object")
        XCTAssertFalse(try json("a[3]=1").matches(text: Array("{\"a\":[1]}".utf8)), "index past the end")
        XCTAssertFalse(try json("a[0]=1").matches(text: Array("{\"a\":{\"0\":1}}".utf8)), "an index is not a key")
        XCTAssertTrue(try json("a.\"0\"=1").matches(text: Array("{\"a\":{\"0\":1}}".utf8)))
        XCTAssertFalse(try json("a.b=1").matches(text: Array("{\"a\":\"b\"}".utf8)), "through a string")
        XCTAssertFalse(id.matches(text: []))
    }

    func testDepthBombIsRefusedQuickly() throws {
        let bomb = [UInt8](repeating: UInt8(ascii: "["), count: 100_000) + [UInt8](repeating: UInt8(ascii: "]"), count: 100_000)
        let objects = Array(String(repeating: "{\"a\":", count: 100_000).utf8)
        let pattern = try json("[0]=1")
        let started = ContinuousClock.now
        XCTAssertFalse(pattern.matches(text: bomb))
        XCTAssertFalse(try json("a.a=1").matches(text: objects))
        XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(500))
    }

    func testJSONPastTheMebibyteNeverMatches() throws {
        let padding = String(repeating: " ", count: MessagePattern.examinedBytes)
        XCTAssertTrue(try json("id=1").matches(text: Array("{\"id\":1}".utf8)))
        XCTAssertFalse(try json("id=1").matches(text: Array("{\"id\":1\(padding)}".utf8)))
    }
}

// libFuzzer target `handshake`: HTTPResponseHead.parse and ClientHandshake.validate on
// arbitrary server bytes.
//
// Compiled into the WebSocketCore module itself (see fuzz/run).
//
// Input: the bytes the server answered. If the first byte is 0xFF, byte 1 chooses a length
// within 256 bytes of the 64 KiB head limit and the rest is a first line followed by bytes
// repeated up to that length, then a blank line (so the limit and long heads are reached
// without huge inputs).
//
// Checks:
//   - parse never crashes; a head's length is ≤ the input length and ≤ 64 KiB; nil only
//     while fewer than 64 KiB arrived; the parsed head is well formed (version HTTP/1.x,
//     3-digit status, token header names, values without surrounding spaces or LF)
//   - monotonic in the input: at every cut point, a prefix that yields a head yields the
//     same head and length as the whole input; a prefix that throws throws the same kind of
//     error as the whole input; a prefix shorter than the head's length yields nil; a nil on
//     the whole input means nil on every prefix
//   - validate with a fixed key and two offered subprotocols: success only for a 101 with
//     the right Upgrade/Connection/Accept, no extension, and an offered subprotocol (checked
//     here independently); error descriptions never crash

let fuzzHandshake = ClientHandshake(url: try! WebSocketURL(parsing: "ws://example.com/chat"),
                                    subprotocols: ["chat", "superchat"],
                                    key: "dGhlIHNhbXBsZSBub25jZQ==")
let fuzzAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

enum ParseOutcome: Equatable {
    case incomplete
    case head(HTTPResponseHead, Int)
    case malformed
    case tooLarge

    init(_ bytes: ArraySlice<UInt8>) {
        // An exact-size copy, so AddressSanitizer sees reads past the prefix.
        let copy = exactCopy(bytes)
        defer { release(copy) }
        do throws(HandshakeError) {
            if let (head, length) = try HTTPResponseHead.parse(copy) {
                self = .head(head, length)
            } else {
                self = .incomplete
            }
        } catch {
            _ = error.description
            switch error {
            case .malformed: self = .malformed
            case .headTooLarge(let limit):
                check(limit == HTTPResponseHead.maximumSize)
                self = .tooLarge
            case .unexpectedStatus, .invalid: checkFailed("parse threw \(error)")
            }
        }
    }
}

func isToken(_ text: String) -> Bool {
    !text.isEmpty && text.utf8.allSatisfy { byte in
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

func checkHead(_ head: HTTPResponseHead, length: Int, bytes: [UInt8]) {
    let count = bytes.count
    check(length >= 2 && length <= count && length <= HTTPResponseHead.maximumSize, "head length \(length) of \(count)")
    // "HTTP/1." and a digit.
    check(head.version.utf8.count == 8 && head.version.hasPrefix("HTTP/1.")
          && head.version.utf8.last.map { $0 >= 0x30 && $0 <= 0x39 } == true, "version \(head.version)")
    check(head.statusCode >= 0 && head.statusCode <= 999)
    for header in head.headers {
        check(isToken(header.name), "header name \(header.name)")
        check(!header.value.utf8.contains(0x0A), "LF in a header value")
        // Values are trimmed by byte (SP and HTAB), folded lines included.
        let value = Array(header.value.utf8)
        check(value.first != 0x20 && value.first != 0x09, "leading space in a header value")
        check(value.last != 0x20 && value.last != 0x09, "trailing space in a header value")
    }
}

/// §4.1's rules, written independently of ClientHandshake.validate.
func expectedNegotiation(_ head: HTTPResponseHead) -> (ok: Bool, subprotocol: String?) {
    func values(_ name: String) -> [String] {
        head.headers.filter { $0.name.lowercased() == name }.map(\.value)
    }
    func trim<S: StringProtocol>(_ s: S) -> String {
        let bytes = Array(s.utf8)
        let kept = bytes.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
        return String(decoding: Array(kept), as: UTF8.self)
    }
    func items(_ value: String, _ separator: UInt8 = UInt8(ascii: ",")) -> [String] {
        Array(value.utf8).split(separator: separator, omittingEmptySubsequences: false).map { trim(String(decoding: $0, as: UTF8.self)) }
    }
    guard head.statusCode == 101 else { return (false, nil) }
    let upgrade = values("upgrade")
    guard upgrade.count == 1, upgrade[0].lowercased() == "websocket" else { return (false, nil) }
    let tokens = values("connection").flatMap { items($0) }.map { $0.lowercased() }
    guard tokens.contains("upgrade") else { return (false, nil) }
    guard values("sec-websocket-accept") == [fuzzAccept] else { return (false, nil) }
    let extensions = values("sec-websocket-extensions").flatMap { items($0) }
        .map { items($0, UInt8(ascii: ";")).first ?? "" }.filter { !$0.isEmpty }
    guard extensions.isEmpty else { return (false, nil) }
    let chosen = values("sec-websocket-protocol").flatMap { items($0) }.filter { !$0.isEmpty }
    guard chosen.count <= 1 else { return (false, nil) }
    if let name = chosen.first {
        guard name == "chat" || name == "superchat" else { return (false, nil) }
        return (true, name)
    }
    return (true, nil)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHandshakeResponse(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    var input = Array(UnsafeBufferPointer(start: data, count: size))
    if input[0] == 0xFF {
        // Big mode: a head of about 64 KiB (the limit ± 256 bytes, from byte 1): the first
        // line of the rest once, then the remaining bytes repeated, then a blank line.
        guard input.count >= 3 else { return 0 }
        let target = HTTPResponseHead.maximumSize - 256 + 2 * Int(input[1])
        let body = input[2...]
        let firstLineEnd = body.firstIndex(of: 0x0A).map { $0 + 1 } ?? body.startIndex
        let unit = body[firstLineEnd...]
        guard !unit.isEmpty else { return 0 }
        var big = Array(body[..<firstLineEnd])
        big.reserveCapacity(target)
        while big.count + unit.count <= target - 4 { big += unit }
        big += unit.prefix(target - 4 - big.count)
        big += [0x0D, 0x0A, 0x0D, 0x0A]
        input = big
    }

    let whole = ParseOutcome(input[...])
    switch whole {
    case .incomplete:
        check(input.count < HTTPResponseHead.maximumSize, "nil after \(input.count) bytes: the head limit is not enforced")
    case .head(let head, let length):
        checkHead(head, length: length, bytes: input)
        let expected = expectedNegotiation(head)
        do {
            let negotiated = try fuzzHandshake.validate(head)
            check(expected.ok, "validate accepted a response that breaks RFC 6455 §4.1")
            check(negotiated.subprotocol == expected.subprotocol, "negotiated subprotocol")
        } catch {
            _ = error.description
            check(!expected.ok, "validate refused a valid response: \(error)")
            if case .unexpectedStatus(let h) = error { check(h == head && h.statusCode != 101) }
            if case .malformed = error { checkFailed("validate threw .malformed") }
            if case .headTooLarge = error { checkFailed("validate threw .headTooLarge") }
        }
    case .malformed, .tooLarge:
        break
    }

    // Prefixes: the outcome can only go from nil to a final answer, never change after that.
    var cuts = Set([0, 1, 4, 5, 8, input.count / 3, input.count / 2, input.count - 1, input.count - 2])
    if case .head(_, let length) = whole {
        cuts.formUnion([length - 1, length, length + 1])
    }
    for cut in cuts where cut >= 0 && cut < input.count {
        let prefix = ParseOutcome(input[..<cut])
        switch prefix {
        case .incomplete:
            break
        case .head(let head, let length):
            check(whole == .head(head, length), "prefix of \(cut) bytes gave a head, the whole input \(whole)")
        case .malformed, .tooLarge:
            check(prefix == whole, "prefix of \(cut) bytes gave \(prefix), the whole input \(whole)")
        }
        if case .head(_, let length) = whole {
            if cut < length { check(prefix == .incomplete, "prefix shorter than the head gave \(prefix)") }
        }
        if whole == .incomplete { check(prefix == .incomplete, "nil on the whole input, \(prefix) on a prefix") }
    }
    return 0
}

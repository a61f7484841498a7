// libFuzzer target `request`: the server's opening handshake on arbitrary client bytes:
// HTTPRequestHeadParser and ServerHandshake (receive, validate, accept), the refusal
// responses, and the Sec-WebSocket-Extensions grammar.
//
// Compiled into the WebSocketCore module itself (see fuzz/run).
//
// Input layout:
//   byte 0   0xFF: big mode (below); else flags: bits 0-2 number of cuts (0-7); bit 3 a
//            256-byte head limit instead of 16 KiB; bit 4 also feed one byte at a time
//   next n   one byte per cut: distance from the previous cut
//   rest     the bytes the "client" sent (a request head, maybe frames after it)
// Big mode: byte 1 chooses a length within 256 bytes of the 16 KiB limit; the rest is a
// first line followed by bytes repeated up to that length, then a blank line.
//
// Checks:
//   - whole and piecewise (and byte-by-byte) feeding give the same outcome and the same
//     offset after the head; an incomplete head consumed every byte; nil only below the
//     limit; the input buffer is never written
//   - an accepted request satisfies §4.2.1, checked here independently on the parsed head
//     (GET, HTTP/1.1+, one Host, Upgrade websocket, Connection upgrade, a 16-byte key,
//     version 13); a refusal happens exactly when that check fails or the head is
//     malformed or too large
//   - the 101 built for an accepted request (first subprotocol, every offered extension)
//     parses with the client's parser and passes ClientHandshake.validate for the same
//     key and subprotocols; its extension header parses back to what was given
//   - every refusal's response parses, has the refusal's status, a Content-Length equal
//     to its body and a one-line body; descriptions are printable
//   - HTTPResponse.refusal with a fuzzed header value either refuses it or sends exactly
//     one such header (no injection)
//   - ExtensionOffer.parse on each header value: a success rebuilds and parses back equal

enum RequestOutcome: Equatable {
    case incomplete
    case request(HandshakeRequest, consumed: Int)
    case refusal(HandshakeRefusal)
}

/// Feeds `input` cut at `bounds` to a fresh ServerHandshake.
func feedRequest(_ input: [UInt8], bounds: [Int], limit: Int) -> RequestOutcome {
    var server = ServerHandshake(maximumHeadSize: limit)
    for p in 0..<(bounds.count - 1) {
        let lower = bounds[p], upper = bounds[p + 1]
        let piece = exactCopy(input[lower..<upper], nilWhenEmpty: true)
        defer { release(piece) }
        var index = 0
        do throws(HandshakeRefusal) {
            let result = try server.receive(piece, &index)
            check(index >= 0 && index <= piece.count, "index \(index) outside the piece")
            if let result { return .request(result, consumed: lower + index) }
            check(index == piece.count, "an incomplete head left bytes unconsumed")
        } catch {
            return .refusal(error)
        }
        check(piece.elementsEqual(input[lower..<upper]), "the input was written")
    }
    return .incomplete
}

/// §4.2.1, written independently of ServerHandshake.validate, on a parsed head.
func expectedAcceptance(_ head: HTTPRequestHead) -> Bool {
    func values(_ name: String) -> [String] { head.headers.filter { $0.name.lowercased() == name }.map(\.value) }
    func items(_ name: String) -> [String] {
        values(name).flatMap { Array($0.utf8).split(separator: UInt8(ascii: ",")) }
            .map { String(decoding: $0.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed(), as: UTF8.self) }
            .filter { !$0.isEmpty }
    }
    let version = Array(head.version.utf8)
    guard head.method == "GET", version.count == 8, version.starts(with: Array("HTTP/1.".utf8)),
          let minor = version.last, minor >= 0x31 && minor <= 0x39 else { return false }
    let target = Array(head.target.utf8)
    guard !target.contains(UInt8(ascii: "#")) else { return false }
    if target.first != UInt8(ascii: "/") {
        guard let colon = target.firstIndex(of: UInt8(ascii: ":")), colon > 0,
              target[colon...].starts(with: Array("://".utf8)), target.count > colon + 3,
              target[colon + 3] != UInt8(ascii: "/") else { return false }
    }
    let host = values("host")
    guard host.count == 1, !host[0].isEmpty else { return false }
    guard items("upgrade").contains(where: { $0.lowercased() == "websocket" }) else { return false }
    guard items("connection").contains(where: { $0.lowercased() == "upgrade" }) else { return false }
    let key = values("sec-websocket-key")
    guard key.count == 1, Base64.decode(key[0])?.count == 16 else { return false }
    guard !values("sec-websocket-version").isEmpty, items("sec-websocket-version") == ["13"] else { return false }
    guard values("origin").count <= 1 else { return false }
    let tokenBytes = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    guard items("sec-websocket-protocol").allSatisfy({ $0.utf8.allSatisfy(tokenBytes.contains) }) else { return false }
    return (try? ExtensionOffer.parse(values("sec-websocket-extensions"))) != nil
}

/// Parses response bytes with the client's parser: the head and the body after it.
func parseResponse(_ bytes: [UInt8]) -> (HTTPResponseHead, ArraySlice<UInt8>) {
    let copy = exactCopy(bytes)
    defer { release(copy) }
    do throws(HandshakeError) {
        guard let (head, length) = try HTTPResponseHead.parse(copy) else { checkFailed("an incomplete response") }
        return (head, bytes[length...])
    } catch {
        checkFailed("a response that does not parse: \(error)")
    }
}

func checkPrintableLine(_ text: String) {
    check(!text.utf8.contains { $0 < 0x20 || $0 == 0x7F }, "a description with a control byte: \(printable(Array(text.utf8)))")
}

func checkAccepted(_ request: HandshakeRequest) {
    check(expectedAcceptance(request.head), "accepted a request that breaks RFC 6455 §4.2.1")
    check(request.path.hasPrefix("/"), "path \(request.path)")
    check(Base64.decode(request.key)?.count == 16)
    let subprotocol = request.subprotocols.first
    let response: [UInt8]
    do throws(ResponseBuildError) {
        response = try ServerHandshake.accept(request, subprotocol: subprotocol, extensions: request.extensions)
    } catch {
        checkFailed("accept refused its own request's offers: \(error)")
    }
    let (head, body) = parseResponse(response)
    check(body.isEmpty && head.statusCode == 101)
    let client = ClientHandshake(url: try! WebSocketURL(parsing: "ws://example.com/"), subprotocols: request.subprotocols,
                                 key: request.key)
    if request.extensions.isEmpty {
        do {
            let negotiated = try client.validate(head)
            check(negotiated.subprotocol == subprotocol, "negotiated subprotocol")
        } catch {
            checkFailed("the client refused the server's 101: \(error)")
        }
    }
    let echoed = try? ExtensionOffer.parse(head.values("Sec-WebSocket-Extensions"))
    check(echoed == request.extensions, "the extension answers do not parse back")
}

func checkRefusal(_ refusal: HandshakeRefusal) {
    checkPrintableLine(refusal.description)
    check([400, 405, 426, 431].contains(refusal.status), "status \(refusal.status)")
    let (head, body) = parseResponse(refusal.response)
    check(head.statusCode == refusal.status)
    check(head.values("Content-Length") == [String(body.count)], "Content-Length")
    check(body.last == 0x0A && body.dropLast().allSatisfy { $0 != 0x0A && $0 != 0x0D }, "a body of one line")
    check(head.values("Connection") == ["close"])
}

/// A fuzzed header value is refused or sent as exactly one header.
func checkNoInjection(_ value: String) {
    do throws(ResponseBuildError) {
        let bytes = try HTTPResponse.refusal(status: 403, headers: [HTTPHeader(name: "X-Fuzz", value: value)])
        let (head, _) = parseResponse(bytes)
        check(head.headers.count == 4 && head.headers[0].name == "X-Fuzz", "header injection: \(head.headers.map(\.name))")
    } catch {
        guard case .header(.badValue) = error else { checkFailed("refused with \(error)") }
    }
}

func checkExtensionGrammar(_ value: String) {
    guard let offers = try? ExtensionOffer.parse(value) else { return }
    guard let rebuilt = try? ExtensionOffer.headerValue(offers) else { checkFailed("a parsed list does not rebuild") }
    check((try? ExtensionOffer.parse(rebuilt)) == offers, "the rebuilt list parses differently")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerHandshake(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    let raw = Array(UnsafeBufferPointer(start: data, count: size))
    var limit = HTTPRequestHead.defaultMaximumSize
    var input: [UInt8]
    var cuts: [Int] = []
    var bytewise = false
    if raw[0] == 0xFF {
        guard raw.count >= 3 else { return 0 }
        let target = limit - 256 + 2 * Int(raw[1])
        let body = raw[2...]
        let firstLineEnd = body.firstIndex(of: 0x0A).map { $0 + 1 } ?? body.startIndex
        let unit = body[firstLineEnd...]
        guard !unit.isEmpty else { return 0 }
        input = Array(body[..<firstLineEnd])
        input.reserveCapacity(target)
        while input.count + unit.count <= target - 4 { input += unit }
        input += unit.prefix(max(0, target - 4 - input.count))
        input += [0x0D, 0x0A, 0x0D, 0x0A]
    } else {
        let flags = raw[0]
        let count = Int(flags & 7)
        if flags & 8 != 0 { limit = 256 }
        bytewise = flags & 16 != 0
        guard raw.count >= 1 + count else { return 0 }
        input = Array(raw[(1 + count)...])
        var position = 0
        for delta in raw[1..<(1 + count)] {
            position = min(input.count, position + Int(delta))
            cuts.append(position)
        }
    }

    let whole = feedRequest(input, bounds: [0, input.count], limit: limit)
    let pieces = feedRequest(input, bounds: [0] + cuts + [input.count], limit: limit)
    check(pieces == whole, "pieces at \(cuts) gave \(pieces), the whole input \(whole)")
    if bytewise && input.count <= 4096 {
        let bytes = feedRequest(input, bounds: Array(0...input.count), limit: limit)
        check(bytes == whole, "byte by byte gave \(bytes), the whole input \(whole)")
    }

    // The head alone, through the parser, to compare with an independent §4.2.1 check.
    var parser = HTTPRequestHeadParser(maximumSize: limit)
    var index = 0
    let copy = exactCopy(input)
    defer { release(copy) }
    let parsed = Result { () throws(HTTPRequestError) in try parser.parse(copy, &index) }

    switch whole {
    case .incomplete:
        check(input.count < limit, "nil after \(input.count) bytes: the head limit is not enforced")
        check(parsed == .success(nil))
    case .request(let request, let consumed):
        check(consumed <= input.count && consumed <= limit, "consumed \(consumed) of \(input.count)")
        check(parsed == .success(request.head) && index == consumed, "the parser alone disagrees")
        checkAccepted(request)
    case .refusal(let refusal):
        checkRefusal(refusal)
        switch refusal {
        case .malformedRequest: check(parsed.isMalformed, "malformed, but the parser gave \(parsed)")
        case .headTooLarge: check(parsed == .failure(.headTooLarge(limit: limit)))
        default:
            guard case .success(let head?) = parsed else { checkFailed("a refusal for a head the parser refused") }
            check(!expectedAcceptance(head), "refused a valid request: \(refusal)")
        }
    }

    // Builders and the extension grammar on fuzzed text (the first line of the input).
    let line = String(decoding: input.prefix { $0 != 0x0A }.prefix(256), as: UTF8.self)
    checkNoInjection(line)
    checkExtensionGrammar(line)
    if case .request(let request, _) = whole {
        for value in request.head.values("Sec-WebSocket-Extensions") { checkExtensionGrammar(value) }
    }
    return 0
}

extension Result where Success == HTTPRequestHead?, Failure == HTTPRequestError {
    var isMalformed: Bool {
        if case .failure(.malformed) = self { return true }
        if case .failure(.notHTTP) = self { return true }  // ServerHandshake says 400 malformed
        return false
    }
}

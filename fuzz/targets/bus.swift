// libFuzzer target `bus`: the bus's RESP parser (Sources/WSPipeBus/RESP.swift), its NATS
// parser (NATSProtocol.swift), its envelope (BusEnvelope.swift) and --bus URLs
// (BusAddress.swift).
//
// Compiled into one module with WebSocketCore and those four files (see fuzz/run).
//
// Input: byte 0 and 1 choose two cut points (0...n), byte 2 the bulk limit (0-255, or
// 1 MiB when it is 255); the rest is what a Redis server sends.
//
// Checks:
//   - the values (and the error, if any) are the same whole, in three pieces (each an
//     exact-size buffer) and byte by byte: the parser never depends on how reads split
//   - no bulk string longer than the limit is kept; `.oversized(n)` only for n > limit
//   - every value, encoded again as RESP, parses back to itself
//   - a bulk the envelope calls text is valid UTF-8 from its payload start
//   - the same three ways for the NATS parser on the same bytes: same operations and error;
//     no payload over the limit; every operation encoded again parses back to itself
//   - the rest as a --bus URL: a parsed URL's description shows *** for its password and parses
//     back to the same host, port, channel and TLS choice

func parseAll(_ pieces: [UnsafeRawBufferPointer], limit: Int) -> ([RESPValue], RESPError?) {
    var parser = RESPParser(maximumBulk: limit)
    var values: [RESPValue] = []
    do throws(RESPError) {
        for piece in pieces { try parser.consume(piece, into: &values) }
    } catch {
        return (values, error)
    }
    return (values, nil)
}

func encodeValue(_ value: RESPValue) -> [UInt8] {
    switch value {
    case .simple(let bytes): return [UInt8(ascii: "+")] + bytes + [13, 10]
    case .error(let bytes): return [UInt8(ascii: "-")] + bytes + [13, 10]
    case .integer(let number): return Array(":\(number)\r\n".utf8)
    case .bulk(let bytes): return Array("$\(bytes.count)\r\n".utf8) + bytes + [13, 10]
    case .null: return Array("$-1\r\n".utf8)
    case .array(let items): return Array("*\(items.count)\r\n".utf8) + items.flatMap(encodeValue)
    case .oversized(let count): return Array("$\(count)\r\n".utf8) + [UInt8](repeating: 0x78, count: count) + [13, 10]
    }
}

/// Whether an oversized bulk is anywhere in `value` (its encoding then has the bytes back).
func holdsOversized(_ value: RESPValue) -> Bool {
    switch value {
    case .oversized: return true
    case .array(let items): return items.contains(where: holdsOversized)
    default: return false
    }
}

func checkValue(_ value: RESPValue, limit: Int) {
    switch value {
    case .bulk(let bytes):
        check(bytes.count <= limit, "a bulk of \(bytes.count) kept over the limit \(limit)")
        if let (kind, start) = BusEnvelope.decode(bytes), kind == .text {
            check(UTF8Validator.isValid(bytes[start...]), "text from the envelope that is not UTF-8")
        }
    case .oversized(let count): check(count > limit, "oversized \(count) within the limit \(limit)")
    case .array(let items): for item in items { checkValue(item, limit: limit) }
    case .simple(let bytes), .error(let bytes): check(!bytes.contains(10), "a line with LF inside")
    default: break
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRESP(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 3 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let stream = Array(input[3...])
    let n = stream.count
    var cuts = [Int(input[0]) % (n + 1), Int(input[1]) % (n + 1)].sorted()
    cuts = [0] + cuts + [n]
    let limit = input[2] == 255 ? 1 << 20 : Int(input[2])

    let whole = exactCopy(stream)
    defer { release(whole) }
    let (values, error) = parseAll([whole], limit: limit)

    var pieces: [UnsafeRawBufferPointer] = []
    for p in 0..<3 { pieces.append(exactCopy(stream[cuts[p]..<cuts[p + 1]], nilWhenEmpty: p == 1)) }
    defer { pieces.forEach(release) }
    let (pieceValues, pieceError) = parseAll(pieces, limit: limit)
    check(pieceValues == values && pieceError == error, "three pieces differ from the whole")

    var bytes: [UnsafeRawBufferPointer] = []
    for i in 0..<n { bytes.append(exactCopy(stream[i..<(i + 1)])) }
    defer { bytes.forEach(release) }
    let (byteValues, byteError) = parseAll(bytes, limit: limit)
    check(byteValues == values && byteError == error, "byte by byte differs from the whole")

    for value in values {
        checkValue(value, limit: limit)
        if case .oversized = value { continue }
        let again = encodeValue(value)
        let copy = exactCopy(again)
        defer { release(copy) }
        let (reparsed, reError) = parseAll([copy], limit: 1 << 20)
        if !holdsOversized(value) { check(reError == nil && reparsed == [value], "a value does not parse back from its encoding") }
    }

    checkNATS(whole: whole, pieces: pieces, bytes: bytes, limit: limit)

    let text = String(decoding: stream, as: UTF8.self)
    if let address = try? BusAddress(parsing: text) {
        let shown = address.description
        if let password = address.password, !password.isEmpty {
            // Where user information goes: never the password (it may still be the port's digits).
            // The authority ends at the first "/" after the scheme; user information at its last "@".
            let afterScheme = shown.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
            let authority = afterScheme.count == 3 ? afterScheme[2].prefix { $0 != "/" } : ""
            let userInfo = authority.lastIndex(of: "@").map { authority[..<$0] } ?? ""
            check(userInfo.hasSuffix("***"), "the password in the description: \(shown)")
        }
        if let back = try? BusAddress(parsing: shown) {
            check(back.host == address.host && back.port == address.port && back.channel == address.channel && back.tls == address.tls,
                  "the description does not parse back to the same bus")
        } else {
            check(false, "the description does not parse: \(shown)")
        }
    }
    return 0
}

func parseNATS(_ pieces: [UnsafeRawBufferPointer], limit: Int) -> ([NATSOperation], NATSError?) {
    var parser = NATSParser(maximumPayload: limit)
    var operations: [NATSOperation] = []
    do throws(NATSError) {
        for piece in pieces { try parser.consume(piece, into: &operations) }
    } catch {
        return (operations, error)
    }
    return (operations, nil)
}

func encodeNATS(_ operation: NATSOperation) -> [UInt8]? {
    switch operation {
    case .info(let json): return Array("INFO ".utf8) + json + [13, 10]
    case .message(let subject, let sid, let payload): return Array("MSG ".utf8) + subject + [0x20] + sid + Array(" \(payload.count)\r\n".utf8) + payload + [13, 10]
    case .oversized: return nil
    case .ping: return Array("PING\r\n".utf8)
    case .pong: return Array("PONG\r\n".utf8)
    case .ok: return Array("+OK\r\n".utf8)
    case .error(let text): return Array("-ERR '".utf8) + text + Array("'\r\n".utf8)
    }
}

func checkNATS(whole: UnsafeRawBufferPointer, pieces: [UnsafeRawBufferPointer], bytes: [UnsafeRawBufferPointer], limit: Int) {
    let (operations, error) = parseNATS([whole], limit: limit)
    let (inPieces, piecesError) = parseNATS(pieces, limit: limit)
    check(inPieces == operations && piecesError == error, "NATS: three pieces differ from the whole")
    let (byByte, byteError) = parseNATS(bytes, limit: limit)
    check(byByte == operations && byteError == error, "NATS: byte by byte differs from the whole")
    for operation in operations {
        switch operation {
        case .message(_, _, let payload): check(payload.count <= limit, "NATS: a payload kept over the limit")
        case .oversized(let count): check(count > limit, "NATS: oversized within the limit")
        default: break
        }
        // An INFO or -ERR text with its own spaces or quotes reads back the same; one that
        // starts with a blank does not (the parser drops blanks after the name): skip those.
        guard let again = encodeNATS(operation) else { continue }
        if case .info(let json) = operation, json.first == 0x20 || json.first == 0x09 || json.isEmpty { continue }
        if case .error = operation { continue }
        let copy = exactCopy(again)
        defer { release(copy) }
        let (reparsed, reError) = parseNATS([copy], limit: 1 << 20)
        check(reError == nil && reparsed == [operation], "NATS: an operation does not parse back from its encoding")
    }
}

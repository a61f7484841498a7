// libFuzzer target `frames`: WebSocketConnection.receive (MessageReader + FrameParser) on
// arbitrary server bytes, cut into pieces at fuzzed positions.
//
// Compiled into the WebSocketCore module itself (see fuzz/run), so it sees internal API.
//
// Input layout:
//   byte 0   flags: bits 0-2 number of cuts (0-7); bit 3 small message limit (100 bytes)
//            instead of 1 MiB; bit 4 empty pieces are passed with a nil base address;
//            bit 5 we send a Close before any input; bit 6 feed one byte at a time;
//            bit 7 cut deltas count in units of 16 bytes
//   next n   one byte per cut: distance from the previous cut
//   rest     the bytes the "server" sent
//
// Checks (precondition failures are crashes):
//   - every index and range stays inside the piece; messageData ranges are non-empty and
//     lie in the bytes consumed by that call; a nil result means the piece was consumed
//     (unless the reader is finished)
//   - messageData only between messageStart and messageEnd; a message never exceeds the
//     limit; a finished text message is valid UTF-8 (by Swift's own decoder); after .close
//     or an error nothing more (nil, no throw), state is .closed
//   - takeOutboundControl hands out well-formed masked control frames (FIN, no RSV, mask
//     bit, ≤ 125-byte payload, ≤ 131 bytes each), exactly a pong per ping while open and one
//     Close (echo, or the error's code, or ours), nothing after the Close (the connection
//     keeps at most 128 KiB of unanswered pings; inputs of at most 4 KiB never reach that)
//   - differential: whole-buffer feeding, piecewise feeding and an independent reference
//     model of RFC 6455's receiving rules give the same events and payload bytes
//   - MaskingKey.apply in two pieces equals a plain byte-by-byte XOR
//   - the engine's fast path: trying receiveWholeMessage before each receive (as the
//     driver does) gives exactly the same items, errors and outbound frames, in both roles;
//     a nil from it consumes nothing
//   - server role: the same stream with every frame masked (a key per frame from the
//     input, payloads XORed, cut frames too) gives a server-role connection, whole and in
//     the same pieces, exactly the client role's events, errors included; its control
//     frames are unmasked (skipped when the stream already has a masked frame)

let fuzzKey = MaskingKey(0x9A, 0x3C, 0x51, 0xE7)

/// An event in a form comparable across splits: payload bytes instead of ranges, adjacent
/// data merged.
enum Item: Equatable, CustomStringConvertible {
    case start(MessageKind)
    case data([UInt8])
    case end
    case ping([UInt8])
    case pong([UInt8])
    case close(ClosePayload)
    case error(ReceiveError)

    var description: String {
        switch self {
        case .start(let k): return "start(\(k))"
        case .data(let d): return "data(\(d.count) bytes)"
        case .end: return "end"
        case .ping(let p): return "ping(\(p.count))"
        case .pong(let p): return "pong(\(p.count))"
        case .close(let c): return "close(\(c.code?.rawValue ?? 0), \(c.reason.count))"
        case .error(let e): return "error(\(e.closeCode.rawValue): \(e))"
        }
    }
}

struct Options {
    var limit: UInt64
    var nilEmpty: Bool
    var closeFirst: Bool
    var role: Role = .client
    /// Try `receiveWholeMessage` before each `receive`, as the engine's driver does.
    var wholeFirst = false
}

struct RunResult {
    var items: [Item] = []
    var outbound: [UInt8] = []
}

func appendItem(_ items: inout [Item], _ item: Item) {
    if case .data(let more) = item, case .data(let have)? = items.last {
        items[items.count - 1] = .data(have + more)
    } else {
        items.append(item)
    }
}

/// Feeds `stream` cut at `cuts` (sorted, within 0...count) to a fresh connection, checking
/// every invariant on the way. Each piece is copied into its own exact-size allocation so
/// AddressSanitizer sees any read past it.
func feed(_ stream: [UInt8], cuts: [Int], _ options: Options) -> RunResult {
    var connection = WebSocketConnection(role: options.role, maximumMessageSize: options.limit, keys: .fixed(fuzzKey))
    var result = RunResult()
    var finished = false
    var inMessage = false
    var kind = MessageKind.binary
    var messageBytes: [UInt8] = []
    var expectedOutbound: [(Opcode, [UInt8])] = []
    var closeQueued = false

    if options.closeFirst {
        connection.close(ClosePayload(code: .normalClosure))
        check(connection.state == .closeSent && !connection.canSendData)
        expectedOutbound.append((.close, [0x03, 0xE8]))
        closeQueued = true
    }

    func collectOutbound() {
        let out = connection.takeOutboundControl()
        check(!connection.hasOutboundControl)
        result.outbound += out
    }
    collectOutbound()

    let bounds = [0] + cuts + [stream.count]
    for p in 0..<(bounds.count - 1) {
        let lower = bounds[p], upper = bounds[p + 1]
        check(lower <= upper)
        let count = upper - lower
        let storage: UnsafeMutableRawBufferPointer
        if count == 0 && options.nilEmpty {
            storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        } else {
            storage = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
            stream.withUnsafeBytes { src in
                if count > 0 { storage.baseAddress!.copyMemory(from: src.baseAddress! + lower, byteCount: count) }
            }
        }
        defer { if storage.baseAddress != nil { storage.deallocate() } }
        let buffer = storage

        var index = 0
        var calls = 0
        while true {
            calls += 1
            check(calls <= 2 * count + 16, "no progress")
            let before = index
            if options.wholeFirst {
                if let whole = connection.receiveWholeMessage(buffer, &index) {
                    check(!finished && !inMessage, "a whole message after the end or inside a message")
                    check(whole.range.lowerBound >= before && whole.range.upperBound == index && index <= count,
                          "a whole message outside the consumed bytes")
                    check(!connection.isReceivingMessage)
                    let bytes = Array(buffer[whole.range])
                    check(UInt64(bytes.count) <= options.limit, "message exceeds the limit")
                    if whole.kind == .text {
                        check(String(validating: bytes, as: UTF8.self) != nil, "accepted invalid UTF-8 text")
                    }
                    appendItem(&result.items, .start(whole.kind))
                    if !bytes.isEmpty { appendItem(&result.items, .data(bytes)) }
                    appendItem(&result.items, .end)
                    collectOutbound()
                    continue
                }
                check(index == before, "receiveWholeMessage consumed bytes and returned nil")
            }
            let event: InboundEvent?
            do {
                event = try connection.receive(buffer, &index)
            } catch {
                check(!finished, "an error after the reader finished")
                check(index >= before && index <= count)
                finished = true
                check(connection.state == .closed && !connection.canSendData)
                check(connection.failure == error)
                if !closeQueued {
                    expectedOutbound.append((.close, ClosePayload(code: error.closeCode).bytes))
                    closeQueued = true
                }
                appendItem(&result.items, .error(error))
                collectOutbound()
                break
            }
            collectOutbound()
            check(index >= before && index <= count, "index outside the piece")
            guard let event else {
                if !finished { check(index == count, "nil before the piece was consumed") }
                break
            }
            check(!finished, "an event after a Close or an error")
            switch event {
            case .messageStart(let k):
                check(!inMessage, "messageStart inside a message")
                inMessage = true
                kind = k
                messageBytes.removeAll()
                check(connection.isReceivingMessage)
                appendItem(&result.items, .start(k))
            case .messageData(let range):
                check(inMessage, "messageData outside a message")
                check(!range.isEmpty, "empty messageData")
                check(range.lowerBound >= before && range.upperBound <= index, "range outside the consumed bytes")
                check(range.upperBound <= count)
                let bytes = Array(buffer[range])
                messageBytes += bytes
                check(UInt64(messageBytes.count) <= options.limit, "message exceeds the limit")
                appendItem(&result.items, .data(bytes))
            case .messageEnd:
                check(inMessage, "messageEnd outside a message")
                check(!connection.isReceivingMessage)
                if kind == .text {
                    check(String(validating: messageBytes, as: UTF8.self) != nil, "accepted invalid UTF-8 text")
                }
                inMessage = false
                appendItem(&result.items, .end)
            case .ping(let payload):
                check(payload.count <= 125)
                check(connection.isReceivingMessage == inMessage)
                if connection.state == .open { expectedOutbound.append((.pong, payload)) }
                appendItem(&result.items, .ping(payload))
            case .pong(let payload):
                check(payload.count <= 125)
                check(connection.isReceivingMessage == inMessage)
                appendItem(&result.items, .pong(payload))
            case .close(let payload):
                finished = true
                check(connection.state == .closed)
                check(connection.closeReceived == payload)
                if let code = payload.code {
                    check(code.isSendable, "accepted an unsendable close code")
                } else {
                    check(payload.reason.isEmpty)
                }
                check(payload.reason.count <= ClosePayload.maximumReasonLength)
                check(String(validating: payload.reason, as: UTF8.self) != nil)
                if !closeQueued {
                    expectedOutbound.append((.close, ClosePayload(code: payload.code).bytes))
                    closeQueued = true
                }
                appendItem(&result.items, .close(payload))
            }
        }
        if finished {
            // Nothing more, ever: nil and no throw, on this piece and any later one.
            var probe = index
            do {
                let again = try connection.receive(buffer, &probe)
                check(again == nil, "an event after a Close or an error")
            } catch {
                checkFailed("a second error after the reader finished: \(error)")
            }
            check(probe == index)
            check(!connection.hasOutboundControl)
        }
    }

    // The control frames handed out, parsed independently of FrameEncoder.
    let frames = parseOutbound(result.outbound, role: options.role)
    check(frames.count == expectedOutbound.count, "outbound control frames: \(frames.count), expected \(expectedOutbound.count)")
    for (got, want) in zip(frames, expectedOutbound) {
        check(got.0 == want.0 && got.1 == want.1, "unexpected outbound control frame")
    }
    return result
}

/// Splits our control frames (masked for a client, not for a server); crashes unless each
/// is well formed.
func parseOutbound(_ bytes: [UInt8], role: Role) -> [(Opcode, [UInt8])] {
    let keySize = role == .client ? 4 : 0
    var frames: [(Opcode, [UInt8])] = []
    var i = 0
    var closed = false
    while i < bytes.count {
        check(!closed, "a frame after our Close")
        check(bytes.count - i >= 2 + keySize, "truncated control frame")
        let first = bytes[i], second = bytes[i + 1]
        check(first & 0x80 != 0, "control frame without FIN")
        check(first & 0x70 == 0, "control frame with RSV bits")
        guard let opcode = Opcode(rawValue: first & 0x0F), opcode.isControl else {
            checkFailed("outbound frame is not a control frame")
        }
        check((second & 0x80 != 0) == (role == .client), "a \(role) frame masked wrongly")
        let length = Int(second & 0x7F)
        check(length <= 125, "control frame payload over 125 bytes")
        let size = 2 + keySize + length
        check(size <= 131 && i + size <= bytes.count, "truncated control frame")
        var payload = Array(bytes[(i + 2 + keySize)..<(i + size)])
        if role == .client {
            let key = Array(bytes[(i + 2)..<(i + 6)])
            check(key == fuzzKey.array, "unexpected masking key")
            for j in payload.indices { payload[j] ^= key[j & 3] }
        }
        if opcode == .close {
            closed = true
            check(payload.count != 1)
        }
        frames.append((opcode, payload))
        i += size
    }
    return frames
}

// MARK: - Reference model

/// The events RFC 6455 §5 prescribes for a client receiving `b` from a server, written
/// directly and naively over the whole input. Errors are reported by close code only.
func model(_ b: [UInt8], limit: UInt64) -> [Item] {
    var items: [Item] = []
    var i = 0
    var message: MessageKind?
    var size: UInt64 = 0
    var text: [UInt8] = []
    func fail(_ code: CloseCode) -> [Item] {
        switch code {
        case .invalidPayloadData: items.append(.error(.invalidUTF8("")))
        case .messageTooBig: items.append(.error(.messageTooBig(size: nil, limit: 0)))
        default: items.append(.error(.protocolError("")))
        }
        return items
    }
    while i + 2 <= b.count {
        let first = b[i], second = b[i + 1]
        let code7 = Int(second & 0x7F)
        let masked = second & 0x80 != 0
        let headerSize = 2 + (code7 == 126 ? 2 : code7 == 127 ? 8 : 0) + (masked ? 4 : 0)
        if b.count - i < headerSize { break }
        let opcodeValue = first & 0x0F
        guard [0, 1, 2, 8, 9, 10].contains(opcodeValue) else { return fail(.protocolError) }
        var length = UInt64(code7)
        if code7 == 126 {
            length = UInt64(b[i + 2]) << 8 | UInt64(b[i + 3])
        } else if code7 == 127 {
            length = 0
            for k in 0..<8 { length = length << 8 | UInt64(b[i + 2 + k]) }
            if length >= 1 << 63 { return fail(.protocolError) }
        }
        if masked { return fail(.protocolError) }
        if first & 0x70 != 0 { return fail(.protocolError) }
        let fin = first & 0x80 != 0
        i += headerSize
        if opcodeValue >= 8 {
            if !fin || length > 125 { return fail(.protocolError) }
            let n = Int(length)
            if b.count - i < n { break }
            let payload = Array(b[i..<(i + n)])
            i += n
            switch opcodeValue {
            case 9: items.append(.ping(payload))
            case 10: items.append(.pong(payload))
            default:
                if n == 1 { return fail(.protocolError) }
                if n == 0 { items.append(.close(ClosePayload(code: nil))); return items }
                let codeValue = UInt16(payload[0]) << 8 | UInt16(payload[1])
                if !((1000...1003).contains(codeValue) || (1007...1014).contains(codeValue) || (3000...4999).contains(codeValue)) {
                    return fail(.protocolError)
                }
                let reason = Array(payload[2...])
                if String(validating: reason, as: UTF8.self) == nil { return fail(.invalidPayloadData) }
                items.append(.close(ClosePayload(code: CloseCode(codeValue), reason: reason)))
                return items
            }
            continue
        }
        if opcodeValue == 0 {
            if message == nil { return fail(.protocolError) }
        } else {
            if message != nil { return fail(.protocolError) }
        }
        let total = (opcodeValue == 0 ? size : 0).addingReportingOverflow(length)
        if total.overflow || total.partialValue > limit { return fail(.messageTooBig) }
        if opcodeValue != 0 {
            message = opcodeValue == 1 ? .text : .binary
            text = []
            items.append(.start(message!))
        }
        size = total.partialValue
        let available = UInt64(b.count - i)
        let n = Int(min(available, length))
        let payload = Array(b[i..<(i + n)])
        i += n
        if message == .text {
            text += payload
            if !isValidUTF8Prefix(text) { return fail(.invalidPayloadData) }
        }
        if n > 0 { appendItem(&items, .data(payload)) }
        if UInt64(n) < length { break }
        if fin {
            if message == .text && String(validating: text, as: UTF8.self) == nil { return fail(.invalidPayloadData) }
            items.append(.end)
            message = nil
        }
    }
    return items
}

/// Whether some continuation could make `bytes` valid UTF-8 (Swift's decoder's verdict: the
/// first error, if any, is a valid sequence cut short by the end of the bytes).
func isValidUTF8Prefix(_ bytes: [UInt8]) -> Bool {
    referenceFirstInvalid(bytes).map { $0 == bytes.count } ?? true
}

/// Compares two item lists; a run that failed may have delivered more (or less) of the
/// failing message's valid prefix, so trailing data before an error need only agree as
/// prefixes. `codesOnly` compares errors by close code.
func sameItems(_ a: [Item], _ b: [Item], codesOnly: Bool) -> Bool {
    func normalized(_ items: [Item]) -> ([Item], [UInt8]?) {
        var items = items
        guard case .error? = items.last else { return (items, nil) }
        let error = items.removeLast()
        var tail: [UInt8]? = []
        if case .data(let d)? = items.last { tail = d; items.removeLast() }
        if codesOnly, case .error(let e) = error {
            items.append(.error(.protocolError("\(e.closeCode.rawValue)")))
        } else {
            items.append(error)
        }
        return (items, tail)
    }
    let (x, tx) = normalized(a), (y, ty) = normalized(b)
    guard x == y else { return false }
    if let tx, let ty {
        return tx.count <= ty.count ? ty.starts(with: tx) : tx.starts(with: ty)
    }
    return true
}

/// `b` with every frame masked as a client would send it: mask bit set, a key (from the
/// frame's position and first byte) after the length, payload XORed, a cut last frame
/// included. nil when a frame is already masked. Stops after a header the parser refuses
/// (reserved opcode, 2^63 length), whose error then comes at the same place.
func maskedAsClient(_ b: [UInt8]) -> [UInt8]? {
    var out: [UInt8] = []
    var i = 0
    while i + 2 <= b.count {
        let second = b[i + 1]
        if second & 0x80 != 0 { return nil }
        let code7 = Int(second & 0x7F)
        let lengthSize = code7 == 126 ? 2 : code7 == 127 ? 8 : 0
        if b.count - i < 2 + lengthSize { break }
        var length: UInt64 = 0
        for k in 0..<lengthSize { length = length << 8 | UInt64(b[i + 2 + k]) }
        if lengthSize == 0 { length = UInt64(code7) }
        let key = [UInt8(truncatingIfNeeded: i), b[i], 0x5A, UInt8(truncatingIfNeeded: i >> 8) ^ 0xC3]
        out += [b[i], second | 0x80] + b[(i + 2)..<(i + 2 + lengthSize)] + key
        i += 2 + lengthSize
        let refused = [3, 4, 5, 6, 7, 11, 12, 13, 14, 15].contains(b[i - 2 - lengthSize] & 0x0F) || length >> 63 != 0
        if refused { return out }
        let n = Int(min(UInt64(b.count - i), length))
        for j in 0..<n { out.append(b[i + j] ^ key[j & 3]) }
        i += n
    }
    return out + b[i...]
}

func checkMasking(_ data: [UInt8], offset: Int, cut: Int) {
    var bytes = data
    let cut = min(cut, bytes.count)
    bytes.withUnsafeMutableBytes { raw in
        fuzzKey.apply(to: raw.baseAddress!, count: cut, payloadOffset: offset)
        fuzzKey.apply(to: raw.baseAddress! + cut, count: raw.count - cut, payloadOffset: offset + cut)
    }
    let key = fuzzKey.array
    for j in data.indices {
        check(bytes[j] == data[j] ^ key[(offset + j) & 3], "MaskingKey.apply differs from XOR")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrames(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size >= 1 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let flags = input[0]
    let cutCount = min(Int(flags & 7), input.count - 1)
    let stream = Array(input[(1 + cutCount)...])
    let options = Options(limit: flags & 8 != 0 ? 100 : 1 << 20, nilEmpty: flags & 16 != 0,
                          closeFirst: flags & 32 != 0)
    var cuts: [Int] = []
    if flags & 64 != 0 {
        cuts = stream.count > 1 ? Array(1..<stream.count) : []
    } else {
        var position = 0
        for k in 0..<cutCount {
            position = min(position + Int(input[1 + k]) * (flags & 128 != 0 ? 16 : 1), stream.count)
            cuts.append(position)
        }
    }

    let whole = feed(stream, cuts: [], options)
    let pieces = feed(stream, cuts: cuts, options)
    check(sameItems(whole.items, pieces.items, codesOnly: false),
                 "whole and piecewise feeding differ:\n\(whole.items)\n\(pieces.items)")
    check(whole.outbound == pieces.outbound, "whole and piecewise outbound control frames differ")
    let expected = model(stream, limit: options.limit)
    check(sameItems(expected, whole.items, codesOnly: true),
                 "the reference model differs:\nmodel \(expected)\nwhole \(whole.items)")

    var fastOptions = options
    fastOptions.wholeFirst = true
    let fast = feed(stream, cuts: cuts, fastOptions)
    check(fast.items == pieces.items && fast.outbound == pieces.outbound,
          "the whole-message fast path differs:\n\(pieces.items)\n\(fast.items)")

    if let masked = maskedAsClient(stream) {
        var serverOptions = options
        serverOptions.role = .server
        let served = feed(masked, cuts: cuts.map { min($0, masked.count) }, serverOptions)
        var serverFastOptions = serverOptions
        serverFastOptions.wholeFirst = true
        let servedFast = feed(masked, cuts: cuts.map { min($0, masked.count) }, serverFastOptions)
        check(servedFast.items == served.items && servedFast.outbound == served.outbound,
              "server role: the whole-message fast path differs:\n\(served.items)\n\(servedFast.items)")
        let servedWhole = feed(masked, cuts: [], serverOptions)
        check(sameItems(whole.items, servedWhole.items, codesOnly: false),
              "the server role differs on the masked stream:\nclient \(whole.items)\nserver \(servedWhole.items)")
        check(sameItems(servedWhole.items, served.items, codesOnly: false),
              "server role: whole and piecewise feeding differ:\n\(servedWhole.items)\n\(served.items)")
    }

    if !stream.isEmpty {
        checkMasking(stream, offset: Int(stream[0]), cut: cutCount > 0 ? Int(input[1]) : stream.count / 2)
    }
    return 0
}

/// What a `MessageReader` reports, one event at a time.
public enum InboundEvent: Equatable, Sendable {
    /// A data message begins (its first frame's header arrived).
    case messageStart(MessageKind)
    /// Payload bytes of the current message at `range` of the input buffer. Text is valid
    /// UTF-8 so far (a code point may continue in the next piece).
    case messageData(Range<Int>)
    /// The current message is complete (FIN received; text ends on a code point boundary).
    case messageEnd
    /// A Ping frame with its payload (at most 125 bytes).
    case ping([UInt8])
    /// A Pong frame with its payload.
    case pong([UInt8])
    /// A valid Close frame. The reader reports nothing after it (§5.5.1).
    case close(ClosePayload)
}

/// Applies RFC 6455's receiving rules on top of `FrameParser`, for either role: reassembles
/// fragmented messages (§5.4), validates text as UTF-8 as bytes arrive (§8.1), enforces the
/// control-frame rules (§5.5), the masking rule of its role (§5.1: a client refuses masked
/// frames, a server unmasked ones), rejects RSV bits no negotiated extension uses (§5.2),
/// continuation frames out of place and messages over the size limit (§10.4).
///
/// Payload bytes are reported as ranges of the caller's buffer and never copied; in the
/// server role they are unmasked in place first (so the buffer is mutable). Control-frame
/// payloads (at most 125 bytes) are collected.
///
/// Extensions (§9): `extensionRSV` are the RSV bits the negotiated extensions use. They are
/// accepted on the first frame of a data message only (on a control or continuation frame
/// they stay a protocol error) and reported in `messageRSV`. A message that carries them is
/// in the extension's encoding (compressed, say), so its text is not UTF-8 checked here:
/// whoever decodes it checks the decoded bytes.
///
/// After a Close frame or an error the reader is finished: `next` returns nil.
public struct MessageReader: Sendable {
    /// Largest message accepted, in bytes; a frame header that would take the current
    /// message past it fails the connection with 1009 before any of its payload is read.
    public var maximumMessageSize: UInt64
    /// Which end we are: decides which masking rule applies to received frames.
    public let role: Role
    /// RSV bits the negotiated extensions use (empty: every RSV bit is refused).
    public let extensionRSV: RSVBits
    /// The RSV bits of the current data message's first frame (of the last one once it
    /// ended): the extensions that encoded it. Empty without extensions.
    public private(set) var messageRSV: RSVBits = []

    private var parser = FrameParser()
    private var frame: FrameHeader?
    private var message: MessageKind?
    private var messageSize: UInt64 = 0       // bytes announced by the message's frames so far
    private var messageBytesSeen: UInt64 = 0  // payload bytes of the message already checked
    private var earlierMessagesBytes: UInt64 = 0  // payload bytes of the data messages before this one
    /// Data messages received whole (their final frame's payload seen).
    public private(set) var messagesReceived: UInt64 = 0
    private var utf8 = UTF8Validator()
    private var control: [UInt8] = []
    private var endPending = false
    private var maskPhase = 0                 // payload offset of the current frame, mod 4
    private var checksUTF8 = false            // the current message is text in no extension's encoding
    /// True once a Close frame arrived or an error was thrown.
    public private(set) var isFinished = false

    /// - Parameters:
    ///   - role: our end; `.server` expects masked frames and unmasks them in place.
    ///   - maximumMessageSize: largest message accepted, in bytes (payload as received).
    ///   - extensionRSV: the RSV bits of the negotiated extensions (§9).
    public init(role: Role = .client, maximumMessageSize: UInt64 = 64 << 20, extensionRSV: RSVBits = []) {
        self.role = role
        self.extensionRSV = extensionRSV
        self.maximumMessageSize = maximumMessageSize
    }

    /// True when a data message has started and not yet ended.
    public var isInsideMessage: Bool { message != nil }
    /// Payload bytes of the current frame still to come (on the wire: compressed, if so).
    public var frameBytesRemaining: UInt64 { parser.payloadRemaining }
    /// Payload bytes of data frames received so far, as on the wire (compressed, if so).
    /// Summed per message rather than per piece: the count costs nothing per read.
    public var dataPayloadReceived: UInt64 { earlierMessagesBytes &+ messageBytesSeen }

    /// The next event from `input[index...]`, advancing `index`; nil when all input is
    /// consumed (or the reader is finished). Throws `ReceiveError` when the peer broke a
    /// rule; the caller then fails the connection with `error.closeCode`. In the server role
    /// the payload bytes of `input` are unmasked in place before they are checked or reported.
    public mutating func next(_ input: UnsafeMutableRawBufferPointer, _ index: inout Int) throws(ReceiveError) -> InboundEvent? {
        if endPending {
            endPending = false
            return .messageEnd
        }
        if isFinished { return nil }
        do {
            return try step(input, &index)
        } catch {
            isFinished = true
            throw error
        }
    }

    /// A whole data message sent as one final frame with no RSV bits, lying entirely in
    /// `input[index...]` while no message is under way: its kind and payload range, `index`
    /// advanced past it. The same as `next`'s `.messageStart`, `.messageData` (unless empty)
    /// and `.messageEnd`, in one call instead of three (a 15-byte message read by wspipe:
    /// 968 instructions before, 557 after). Nil, with nothing consumed and nothing `next`
    /// reads changed (the UTF-8 validator, which `next` resets at a message's start, aside),
    /// for anything else (a fragment, a control frame, a frame not all here yet, one that
    /// breaks a rule): `next` takes those, and names the rule.
    public mutating func nextWholeMessage(_ input: UnsafeMutableRawBufferPointer, _ index: inout Int) -> (kind: MessageKind, range: Range<Int>)? {
        guard !endPending, !isFinished, message == nil, parser.isAtFrameBoundary, let base = input.baseAddress else { return nil }
        let available = input.count - index
        guard available >= 2 else { return nil }
        let p = base + index
        let first = p.load(as: UInt8.self)
        // FIN set, RSV clear, opcode text (1) or binary (2); masked as the role expects.
        guard first == 0x81 || first == 0x82,
              (p.load(fromByteOffset: 1, as: UInt8.self) & 0x80 != 0) == (role == .server),
              let (header, headerSize) = try? FrameParser.parseHeader(p, available: available) else { return nil }
        let length = header.payloadLength
        guard length <= maximumMessageSize, length <= UInt64(available - headerSize) else { return nil }
        let start = index + headerSize
        let count = Int(length)
        let payload = base + start
        header.maskingKey?.apply(to: payload, count: count)
        if first == 0x81 {
            utf8.reset()
            if utf8.validate(payload, count: count) != nil || !utf8.isComplete {
                // Masked back: `next` reads the frame again and reports the error as ever.
                header.maskingKey?.apply(to: payload, count: count)
                return nil
            }
        }
        earlierMessagesBytes &+= messageBytesSeen
        messageBytesSeen = length
        messageSize = length
        messageRSV = []
        messagesReceived &+= 1
        index = start + count
        return (first == 0x81 ? .text : .binary, start..<(start + count))
    }

    /// Ends reading: `next` returns nil from now on, even where a message's end was due
    /// (the connection failed for a reason found outside the reader).
    mutating func finish() {
        isFinished = true
        endPending = false
    }

    private mutating func step(_ input: UnsafeMutableRawBufferPointer, _ index: inout Int) throws(ReceiveError) -> InboundEvent? {
        while true {
            guard let event = try parser.next(UnsafeRawBufferPointer(input), &index) else { return nil }
            switch event {
            case .header(let header):
                if let started = try begin(header) { return .messageStart(started) }
            case .payload(let range, let frameEnd):
                guard let header = frame else { continue }
                // Only the server role lets a masked frame through `begin`: one branch per
                // piece, no per-byte work for a client.
                if let key = header.maskingKey, !range.isEmpty, let base = input.baseAddress {
                    key.apply(to: base + range.lowerBound, count: range.count, payloadOffset: maskPhase)
                    maskPhase = (maskPhase + range.count) & 3
                }
                if header.opcode.isControl {
                    if !range.isEmpty, let base = input.baseAddress {
                        control.append(contentsOf: UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count))
                    }
                    if frameEnd {
                        frame = nil
                        return try finishControl(header.opcode)
                    }
                    continue
                }
                if checksUTF8, !range.isEmpty, let base = input.baseAddress {
                    if let bad = utf8.validate(base + range.lowerBound, count: range.count) {
                        let byte = base.load(fromByteOffset: range.lowerBound + bad, as: UInt8.self)
                        let offset = messageBytesSeen + UInt64(bad)
                        throw .invalidUTF8("text message is not valid UTF-8 (byte 0x\(hex(byte)) at offset \(offset))")
                    }
                }
                messageBytesSeen += UInt64(range.count)
                if frameEnd {
                    frame = nil
                    if header.fin {
                        if checksUTF8 && !utf8.isComplete {
                            throw .invalidUTF8("text message ends in the middle of a UTF-8 sequence")
                        }
                        message = nil
                        messagesReceived &+= 1
                        if range.isEmpty { return .messageEnd }
                        endPending = true
                        return .messageData(range)
                    }
                }
                if !range.isEmpty { return .messageData(range) }
            }
        }
    }

    /// Checks a header against the receiving rules; returns the kind of a message it starts.
    private mutating func begin(_ header: FrameHeader) throws(ReceiveError) -> MessageKind? {
        switch role {
        case .client where header.maskingKey != nil:
            throw .protocolError("the server sent a masked frame (RFC 6455 §5.1: servers never mask)")
        case .server where header.maskingKey == nil:
            throw .protocolError("the client sent an unmasked frame (RFC 6455 §5.1: clients always mask)")
        default:
            break
        }
        if header.rsv != 0 { try checkRSV(header) }
        frame = header
        maskPhase = 0
        if header.opcode.isControl {
            if !header.fin { throw .protocolError("fragmented \(header.opcode) frame (control frames must have FIN set)") }
            if header.payloadLength > 125 {
                throw .protocolError("\(header.opcode) frame with a \(header.payloadLength)-byte payload (control frames carry at most 125)")
            }
            control.removeAll(keepingCapacity: true)
            // Reserved at the first control frame, not at init: an idle connection that
            // never gets one holds no buffer for it (168 bytes of heap each).
            if control.capacity < 125 { control.reserveCapacity(125) }
            return nil
        }
        var started: MessageKind?
        switch header.opcode {
        case .continuation:
            guard message != nil else { throw .protocolError("continuation frame without a message to continue") }
        default:
            if let current = message {
                throw .protocolError("new \(header.opcode) frame while a fragmented \(current) message is unfinished")
            }
            let kind: MessageKind = header.opcode == .text ? .text : .binary
            message = kind
            messageSize = 0
            earlierMessagesBytes &+= messageBytesSeen
            messageBytesSeen = 0
            messageRSV = RSVBits(rawValue: header.rsv)
            checksUTF8 = kind == .text && messageRSV.isEmpty
            utf8.reset()
            started = kind
        }
        let (total, overflow) = messageSize.addingReportingOverflow(header.payloadLength)
        let limit = messageRSV.isEmpty ? maximumMessageSize : Self.encodedLimit(maximumMessageSize)
        if overflow || total > limit {
            throw .messageTooBig(size: overflow ? nil : total, limit: maximumMessageSize)
        }
        messageSize = total
        return started
    }

    /// How large a message an extension encoded (RSV bits set: compressed) may be on the
    /// wire: the limit is the decoded size's, which the decoder applies, and data that does
    /// not compress grows a little (zlib's deflateBound: about 1/4096 and a few bytes), so
    /// a 1000-byte random message, 1,006 bytes compressed, once failed
    /// `--max-message-size 1000`. The allowance still bounds a message that never decodes.
    static func encodedLimit(_ limit: UInt64) -> UInt64 {
        let (sum, overflow) = limit.addingReportingOverflow(limit >> 10 + 64)
        return overflow ? .max : sum
    }

    /// RSV bits are an extension's, on a message's first frame only (§5.2, §9).
    private func checkRSV(_ header: FrameHeader) throws(ReceiveError) {
        let bits = RSVBits(rawValue: header.rsv)
        if extensionRSV.isEmpty {
            throw .protocolError("\(header.opcode) frame with RSV bits \(bits) set, but no extension was negotiated")
        }
        if header.opcode.isControl || header.opcode == .continuation {
            throw .protocolError("\(header.opcode) frame with RSV bits \(bits) set (extensions set them only on a message's first frame)")
        }
        if !extensionRSV.isSuperset(of: bits) {
            throw .protocolError("\(header.opcode) frame with RSV bits \(bits) set, but the negotiated extensions use only \(extensionRSV)")
        }
    }

    private mutating func finishControl(_ opcode: Opcode) throws(ReceiveError) -> InboundEvent {
        switch opcode {
        case .ping: return .ping(control)
        case .pong: return .pong(control)
        default:
            let payload = try ClosePayload(parsing: control)
            isFinished = true
            return .close(payload)
        }
    }
}

@inline(__always) func hex(_ byte: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
}

/// One end of an open WebSocket connection, client or server, without any I/O (RFC 6455 §5–§7).
///
/// Feed received bytes to `receive(_:_:)` and act on the events; write the bytes that
/// `takeOutboundControl()` hands out (pongs, Close frames) at the next frame boundary;
/// frame outgoing data with `makeHeader(...)` and, in the client role, mask it with the key
/// in the header (a server's headers have none, §5.1).
/// The connection answers pings with pongs carrying the same payload (§5.5.2), echoes the
/// peer's Close (§5.5.1) and, when the peer breaks a rule, queues a Close with the
/// matching code (1002, 1007, 1009) before rethrowing the error (§7.1.7).
public struct WebSocketConnection: Sendable {
    public enum State: Sendable, Equatable {
        /// Data may flow both ways.
        case open
        /// We sent a Close and wait for the peer's (we still receive data, §1.4).
        case closeSent
        /// The peer's Close arrived and the owner answers it (`echoesClose` off): data may
        /// still be sent until then, nothing more is received.
        case closeReceived
        /// Both Close frames have been exchanged (or we failed the connection): the TCP
        /// connection should be closed once the queued output is written.
        case closed
    }

    public private(set) var state = State.open
    /// The Close we sent (or queued), if any.
    public private(set) var closeSent: ClosePayload? {
        get { closing?.sent }
        set { withClosing { $0.sent = newValue } }
    }
    /// The Close the peer sent, if any.
    public private(set) var closeReceived: ClosePayload? {
        get { closing?.received }
        set { withClosing { $0.received = newValue } }
    }
    /// Why we failed the connection, if we did.
    public private(set) var failure: ReceiveError? {
        get { closing?.failure }
        set { withClosing { $0.failure = newValue } }
    }
    /// The three above, made at the first of them: an open connection (an idle server's
    /// thousands) carries one word for them, not about 70 bytes.
    private var closing: ClosingFacts?
    /// Copy-on-write: changed only through `withClosing` while uniquely referenced, so the
    /// copies that share one only read it.
    private final class ClosingFacts: @unchecked Sendable {
        var sent: ClosePayload?
        var received: ClosePayload?
        var failure: ReceiveError?
        init() {}
        init(copying other: ClosingFacts) {
            sent = other.sent
            received = other.received
            failure = other.failure
        }
    }
    private mutating func withClosing(_ change: (ClosingFacts) -> Void) {
        if closing == nil {
            closing = ClosingFacts()
        } else if !isKnownUniquelyReferenced(&closing) {
            closing = ClosingFacts(copying: closing!)  // a copied connection closes alone
        }
        change(closing!)
    }
    /// Payload bytes of the frames made by `makeHeader`, data frames (control frames come
    /// from `takeOutboundControl`), as framed: after compression when an extension
    /// compressed them. A server's metrics read it.
    public private(set) var dataPayloadFramed: UInt64 = 0
    /// The peer's Close is echoed at once (§5.5.1). Off: it is answered by the owner's
    /// `close(_:)`, which may first send what it still has (a program's last output: the
    /// RFC asks for the answer "as soon as practical", not at once).
    public var echoesClose = true

    /// Which end we are: a client masks what it sends, a server does not (§5.1).
    public let role: Role
    /// The extensions negotiated in the opening handshake, in the order they apply (§9).
    public let extensions: [any WebSocketExtension]

    private var reader: MessageReader
    private var keys: MaskingKeyGenerator
    private var outbound: [UInt8] = []
    /// Payloads of pings not yet answered, oldest first. A burst is answered in full; a
    /// flood from a server that does not read our answers keeps only the most recent
    /// `maximumPendingPongBytes` of payload (§5.5.3 lets an endpoint answer only the most
    /// recent ping), so memory stays bounded.
    private var pongs: [[UInt8]] = []
    private var pongBytes = 0
    /// About a thousand maximum-size pings.
    public static let maximumPendingPongBytes = 128 * 1024

    /// A connection as its opening handshake settled it.
    /// - Parameters:
    ///   - agreement: what the handshake agreed (role, extensions): the extensions' RSV bits
    ///     are accepted on the first frame of received data messages (see `MessageReader`)
    ///     and may be set on ours.
    ///   - maximumMessageSize: largest message accepted from the peer, in bytes.
    ///   - keys: the source of masking keys (`.system` outside tests; unused by a server).
    public init(_ agreement: HandshakeAgreement, maximumMessageSize: UInt64 = 64 << 20, keys: MaskingKeyGenerator = .system) {
        self.init(role: agreement.role, maximumMessageSize: maximumMessageSize, keys: keys, extensions: agreement.extensions)
    }

    /// Tests and fuzz targets of this package: a connection no handshake settled.
    package init(role: Role = .client, maximumMessageSize: UInt64 = 64 << 20, keys: MaskingKeyGenerator = .system,
                extensions: [any WebSocketExtension] = []) {
        self.role = role
        self.extensions = extensions
        reader = MessageReader(role: role, maximumMessageSize: maximumMessageSize,
                               extensionRSV: extensions.reduce(into: RSVBits()) { $0.formUnion($1.rsv) })
        self.keys = keys
    }

    /// Largest message accepted from the peer, in bytes (an extension's decoder applies it
    /// to the decoded size).
    public var maximumMessageSize: UInt64 { reader.maximumMessageSize }

    /// The RSV bits of the current (or last) received data message's first frame.
    public var receivingMessageRSV: RSVBits { reader.messageRSV }

    /// Whether data frames may still be sent (no Close sent, connection not failed).
    public var canSendData: Bool { state == .open || state == .closeReceived }

    /// Whether a data message from the peer is partly received.
    public var isReceivingMessage: Bool { reader.isInsideMessage }
    /// Payload bytes of the frame being received still to come: a receiver that assembles
    /// a message can size its storage once.
    public var frameBytesRemaining: UInt64 { reader.frameBytesRemaining }
    /// Data messages received whole, and their payload bytes as received (compressed, if
    /// so; a message under way counts what arrived): a server's metrics read them.
    public var dataMessagesReceived: UInt64 { reader.messagesReceived }
    public var dataPayloadReceived: UInt64 { reader.dataPayloadReceived }

    /// The next event from `input[index...]` (see `MessageReader`), with the automatic
    /// replies queued: a pong for each ping (unless we already sent a Close), the echo of the
    /// peer's Close. Throws `ReceiveError` after queueing the failing Close. In the server
    /// role, payload bytes of `input` are unmasked in place.
    public mutating func receive(_ input: UnsafeMutableRawBufferPointer, _ index: inout Int) throws(ReceiveError) -> InboundEvent? {
        let event: InboundEvent?
        do {
            event = try reader.next(input, &index)
        } catch {
            fail(error)
            throw error
        }
        guard let event else { return nil }
        switch event {
        case .ping(let payload):
            if state == .open {
                pongs.append(payload)
                pongBytes += payload.count + 1
                while pongBytes > WebSocketConnection.maximumPendingPongBytes, let oldest = pongs.first {
                    pongs.removeFirst()
                    pongBytes -= oldest.count + 1
                }
            }
        case .close(let payload):
            closeReceived = payload
            if closeSent == nil && !echoesClose {
                state = .closeReceived
            } else {
                if closeSent == nil {
                    // Echo the status code (§5.5.1), without the reason.
                    let echo = ClosePayload(code: payload.code)
                    closeSent = echo
                    queue(.close, echo.bytes)
                }
                state = .closed
            }
        default:
            break
        }
        return event
    }

    /// A whole data message in one step (`MessageReader.nextWholeMessage`), or nil with
    /// nothing consumed: `receive` takes what comes next. Nothing to queue for a data message.
    public mutating func receiveWholeMessage(_ input: UnsafeMutableRawBufferPointer, _ index: inout Int) -> (kind: MessageKind, range: Range<Int>)? {
        reader.nextWholeMessage(input, &index)
    }

    /// Starts the closing handshake, or answers the peer's Close (`echoesClose` off):
    /// queues a Close frame. Does nothing if one was sent.
    public mutating func close(_ payload: ClosePayload) {
        guard closeSent == nil else { return }
        closeSent = payload
        // Pings received before our Close are still answered; none after it (§5.5.2).
        queue(.close, payload.bytes)
        if state == .open { state = .closeSent } else if state == .closeReceived { state = .closed }
    }

    /// Queues a Ping with `payload` (at most 125 bytes). Returns false once closing.
    @discardableResult
    public mutating func ping(_ payload: [UInt8]) -> Bool {
        guard state == .open, payload.count <= 125 else { return false }
        queue(.ping, payload)
        return true
    }

    /// Fails the connection (§7.1.7): queues a Close with the error's code if none was sent.
    public mutating func fail(_ error: ReceiveError) {
        failure = error
        // Nothing more is received, not even the end of a message whose last frame was read
        // (an inflater that found bad data in it fails the connection before that end).
        reader.finish()
        if closeSent == nil {
            let payload = ClosePayload(code: error.closeCode)
            closeSent = payload
            queue(.close, payload.bytes)
        }
        state = .closed
    }

    /// Marks the connection closed without a Close frame (TCP lost, or given up on).
    public mutating func abandon() { state = .closed }

    /// True when control frames wait to be written.
    public var hasOutboundControl: Bool { !outbound.isEmpty || !pongs.isEmpty }

    /// True when a Close or one of our pings waits (not only pongs).
    public var hasOutboundCloseOrPing: Bool { !outbound.isEmpty }

    /// True when a pong waits (a ping received and not answered yet).
    public var hasPendingPong: Bool { !pongs.isEmpty }

    /// Forgets the pongs waiting except the one for the most recent ping (§5.5.3: an
    /// endpoint that has not sent a Pong for earlier pings may answer only the last one).
    /// For a writer whose earlier pong has not left yet, so replies never pile up.
    public mutating func keepOnlyMostRecentPong() {
        guard pongs.count > 1, let last = pongs.last else { return }
        pongs = [last]
        pongBytes = last.count + 1
    }

    /// Control frames to write at the next frame boundary (masked in the client role): pongs
    /// (the answers to the pings received so far, oldest first), then our pings and Close in
    /// the order queued.
    public mutating func takeOutboundControl() -> [UInt8] {
        var frames: [UInt8] = []
        for payload in pongs { frames += FrameEncoder.frame(opcode: .pong, payload: payload, maskingKey: outgoingKey()) }
        pongs.removeAll(keepingCapacity: true)
        pongBytes = 0
        frames += outbound
        outbound.removeAll(keepingCapacity: true)
        return frames
    }

    /// The header of an outgoing data frame: with a fresh masking key in the client role
    /// (§5.3), without one in the server role (§5.1). The caller masks the payload with
    /// `header.maskingKey`, if any, and writes header then payload. `rsv` are the bits of
    /// the extensions that encoded the message (first frame only, §9); they must belong to
    /// a negotiated extension.
    public mutating func makeHeader(opcode: Opcode, fin: Bool = true, rsv: RSVBits = [], payloadLength: Int) -> FrameHeader {
        precondition(rsv.isEmpty || reader.extensionRSV.isSuperset(of: rsv), "RSV bits \(rsv) of no negotiated extension")
        dataPayloadFramed &+= UInt64(payloadLength)  // control frames come from takeOutboundControl
        return FrameHeader(fin: fin, rsv: rsv.rawValue, opcode: opcode, maskingKey: outgoingKey(),
                           payloadLength: UInt64(payloadLength))
    }

    /// A whole data frame as bytes, masked in the client role (convenient for small messages
    /// and tests).
    public mutating func frame(_ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, rsv: RSVBits = []) -> [UInt8] {
        let header = makeHeader(opcode: opcode, fin: fin, rsv: rsv, payloadLength: payload.count)
        return FrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, rsv: header.rsv, maskingKey: header.maskingKey)
    }

    /// A fresh masking key (for client callers that build headers themselves).
    public mutating func nextMaskingKey() -> MaskingKey { keys.next() }

    /// A fresh key for a frame we send, or nil for a server (it never masks).
    @inline(__always)
    private mutating func outgoingKey() -> MaskingKey? { role.masksOutgoingFrames ? keys.next() : nil }

    private mutating func queue(_ opcode: Opcode, _ payload: [UInt8]) {
        outbound += FrameEncoder.frame(opcode: opcode, payload: payload, maskingKey: outgoingKey())
    }
}

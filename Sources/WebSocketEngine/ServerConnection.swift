import WebSocketCore
import WebSocketTransport

/// What is known of an accepted client once its opening handshake is done: what a mode
/// (echo, broadcast, a child process per connection) needs to serve it and to describe it.
public struct ClientInfo: Sendable {
    /// Numbered from 1 in the order handshakes completed, per server.
    public let id: Int
    /// The request as accepted (path, query, headers, offers).
    public let request: HandshakeRequest
    /// "ip:port" of the client, or the socket path for a Unix listener.
    public let remoteAddress: String
    /// "ip:port" the client connected to, or the socket path.
    public let localAddress: String
    /// Whether the connection is TLS.
    public let isSecure: Bool
    /// The verified client certificate's subject under mutual TLS, else nil.
    public let clientCertificateSubject: String?
    /// The subprotocol selected (nil: none).
    public let subprotocol: String?
    /// permessage-deflate as agreed: the 101's answer and what it means for us (nil: none).
    public var deflate: (response: ExtensionOffer, configuration: DeflateConfiguration?)? = nil
}

/// One accepted client: its facts and its driver, between the server and the mode's
/// handler (the driver's events go to `handler`; its ending also to the server).
public final class ServerConnection: ConnectionDelegate {
    public let info: ClientInfo
    /// The driver, until the connection ends.
    public private(set) var driver: ConnectionDriver?
    /// The mode's per-connection delegate; may be shared by every connection (it gets the
    /// driver with each event).
    public var handler: ConnectionDelegate?
    private weak var server: WebSocketServer?

    init(info: ClientInfo, server: WebSocketServer) {
        self.info = info
        self.server = server
    }

    func start(_ driver: ConnectionDriver) {
        self.driver = driver
        driver.start()
    }

    public func connection(_ c: ConnectionDriver, didStartMessage kind: MessageKind) { handler?.connection(c, didStartMessage: kind) }
    public func connection(_ c: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        handler?.connection(c, didReceive: bytes, count: count, in: buffer)
    }
    public func connectionDidEndMessage(_ c: ConnectionDriver) { handler?.connectionDidEndMessage(c) }
    public func connection(_ c: ConnectionDriver, didReceivePing payload: [UInt8]) { handler?.connection(c, didReceivePing: payload) }
    public func connection(_ c: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {
        handler?.connection(c, didReceivePong: payload, roundTrip: roundTrip)
    }
    public func connection(_ c: ConnectionDriver, didReceiveClose payload: ClosePayload) { handler?.connection(c, didReceiveClose: payload) }
    public func connection(_ c: ConnectionDriver, didFail error: ReceiveError) { handler?.connection(c, didFail: error) }
    public func connectionDidProcessInput(_ c: ConnectionDriver) { handler?.connectionDidProcessInput(c) }
    public func connectionWillReleaseReceiveBuffer(_ c: ConnectionDriver) { handler?.connectionWillReleaseReceiveBuffer(c) }
    public func connection(_ c: ConnectionDriver, note: ConnectionNote) { handler?.connection(c, note: note) }
    public func connectionHasRoom(_ c: ConnectionDriver) { handler?.connectionHasRoom(c) }
    public func connection(_ c: ConnectionDriver, didEnd ending: ConnectionEnding) {
        handler?.connection(c, didEnd: ending)
        handler = nil
        driver = nil
        server?.connectionEnded(self, ending)
    }
}

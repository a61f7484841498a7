import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// One local TCP connection of --forward-listen carried over its client WebSocket by the
/// engine's `StreamRelay`: its bytes as binary messages both ways, with the relay's flow
/// control and endings.
final class ForwardedPair {
    private let relay: StreamRelay
    private let driver: ConnectionDriver

    init(loop: EventLoop, local: TCPStream, opened: ForwardListening.OpenedConnection, config: BridgeConfiguration,
         onEnd: @escaping (RelayOutcome) -> Void) {
        var relayOptions = RelayOptions()
        relayOptions.chunkSize = config.stdio.chunkSize  // --chunk-size
        relay = StreamRelay(loop: loop, stream: local, options: relayOptions)
        relay.onEnd = onEnd
        driver = ConnectionDriver(loop: loop, stream: opened.opened.stream, agreement: opened.opened.agreement,
                                  maximumMessageSize: config.maxMessageSize, options: ForwardedPair.connectionOptions(config),
                                  received: opened.buffer, parsed: opened.opened.headLength, delegate: relay)
    }

    /// The client options' timeouts and pings; many pairs: 64 KiB buffers, let go while idle.
    static func connectionOptions(_ config: BridgeConfiguration) -> ConnectionOptions {
        var options = ConnectionOptions()
        options.closeTimeout = config.closeTimeout
        options.pingInterval = config.pingInterval
        options.pingTimeout = config.pingTimeout
        options.receiveBufferSize = ForwardListening.receiveBufferSize
        options.keepsBuffersWhenIdle = false
        return options
    }

    func start() { relay.start(driver) }

    /// A signal: Close 1001, at most `seconds` for the rest of the closing.
    func close(within seconds: Double) { driver.close(ClosePayload(code: .goingAway), within: seconds) }
}

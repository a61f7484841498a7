/// Which end of a WebSocket connection this endpoint is (RFC 6455 §5.1, §5.3).
///
/// The role decides masking: a client masks every frame it sends and refuses masked frames
/// from the server; a server never masks and refuses unmasked frames from the client.
public enum Role: Sendable {
    case client
    case server

    /// The peer's role.
    public var peer: Role { self == .client ? .server : .client }

    /// Whether frames this endpoint sends carry a masking key (§5.3: only a client's).
    @inlinable public var masksOutgoingFrames: Bool { self == .client }

    /// Who we talk to, for error messages: "server" or "client".
    public var peerName: String { self == .client ? "server" : "client" }
}

/// The three reserved bits of a frame header (RFC 6455 §5.2), with the values
/// `FrameHeader.rsv` uses: RSV1 = 4, RSV2 = 2, RSV3 = 1. Only a negotiated extension may
/// give them a meaning (§5.8, §9).
public struct RSVBits: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue & 7 }

    public static let rsv1 = RSVBits(rawValue: 4)
    public static let rsv2 = RSVBits(rawValue: 2)
    public static let rsv3 = RSVBits(rawValue: 1)

    /// "RSV1", "RSV1+RSV3", or "none".
    public var description: String {
        var names: [String] = []
        if contains(.rsv1) { names.append("RSV1") }
        if contains(.rsv2) { names.append("RSV2") }
        if contains(.rsv3) { names.append("RSV3") }
        return names.isEmpty ? "none" : names.joined(separator: "+")
    }
}

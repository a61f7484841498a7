/// What an opening handshake settled for one connection: our role, the extensions both
/// ends agreed to (configured as agreed), and the subprotocol. A `WebSocketConnection` is
/// made from one (`WebSocketConnection.init(_:maximumMessageSize:keys:)`), and only a
/// handshake makes one outside this package (`ClientHandshake.agreement(_:)`,
/// `ServerHandshake.agreement(subprotocol:deflate:)`): a core built by hand could not
/// know the extensions (`--reconnect` once built its cores without them, and every
/// compressed message from a server that agreed permessage-deflate failed the connection).
public struct HandshakeAgreement {
    /// Our end of the connection.
    public let role: Role
    /// The agreed extensions, configured, in the order they apply.
    public let extensions: [any WebSocketExtension]
    /// The subprotocol the server chose, if any.
    public let subprotocol: String?

    /// Tests, fuzz targets and benchmarks of this package: a connection no handshake made.
    package init(role: Role, extensions: [any WebSocketExtension] = [], subprotocol: String? = nil) {
        self.role = role
        self.extensions = extensions
        self.subprotocol = subprotocol
    }

    /// The permessage-deflate this connection agreed to, configured; nil when none.
    public var deflate: PerMessageDeflate? {
        extensions.lazy.compactMap { $0 as? PerMessageDeflate }.first { $0.configuration != nil }
    }
}

extension ClientHandshake {
    /// The connection this handshake's validated answer (`validate`) agrees to: each
    /// extension the server answered, configured from our offer of it (permessage-deflate
    /// with the windows and context rules the answer sets, seen from the client).
    /// - Throws: for an answer our offer does not accept (`validate` checked it already).
    public func agreement(_ negotiated: Negotiated) throws(ExtensionNegotiationError) -> HandshakeAgreement {
        var agreed: [any WebSocketExtension] = []
        for response in negotiated.extensions {
            let name = response.name.lowercased()
            guard let offered = extensions.first(where: { $0.name.lowercased() == name }) else { continue }
            if let deflate = offered as? PerMessageDeflate {
                let parameters = try deflate.acceptedParameters(response)
                agreed.append(deflate.agreed(DeflateConfiguration(agreed: parameters, role: .client)))
            } else {
                try offered.accept(response)
                agreed.append(offered)
            }
        }
        return HandshakeAgreement(role: .client, extensions: agreed, subprotocol: negotiated.subprotocol)
    }
}

extension ServerHandshake {
    /// A server's connection after the 101 it answered (`accept`): the subprotocol chosen
    /// and permessage-deflate as `PerMessageDeflate.negotiate` agreed it (nil: declined).
    public static func agreement(subprotocol: String?, deflate: PerMessageDeflate?) -> HandshakeAgreement {
        HandshakeAgreement(role: .server, extensions: deflate.map { [$0] } ?? [], subprotocol: subprotocol)
    }
}

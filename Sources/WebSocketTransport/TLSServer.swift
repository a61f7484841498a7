import COpenSSL
import CTLSShims
import Glibc

/// A TLS server's own certificate and what it asks of clients (`wspipe -l` with `--cert`).
/// A value the faces fill in; `TLSServerContext` loads it.
public struct TLSServerOptions: Sendable, Equatable, CustomStringConvertible {
    /// The server's certificate, optionally followed by its chain (PEM).
    public var certificateFile: String
    /// Its private key (PEM; may be the certificate's file).
    public var keyFile: String
    /// The passphrase of an encrypted key; nil: none. Never printed.
    public var keyPassword: [UInt8]?
    public var minimumVersion: TLSVersion
    /// PEM file of the CAs whose client certificates are accepted; set, every client must
    /// present a valid certificate signed by one of them (mutual TLS), or its handshake fails.
    public var clientCAFile: String?

    public init(certificateFile: String, keyFile: String, keyPassword: [UInt8]? = nil,
                minimumVersion: TLSVersion = .tls12, clientCAFile: String? = nil) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.keyPassword = keyPassword
        self.minimumVersion = minimumVersion
        self.clientCAFile = clientCAFile
    }

    public var description: String {
        "certificate \(certificateFile), key \(keyFile)\(keyPassword == nil ? "" : " (passphrase given)")"
            + (clientCAFile.map { ", client certificates from \($0)" } ?? "")
    }
}

/// A loaded server-side TLS configuration (an OpenSSL `SSL_CTX` in the server method),
/// shared by every connection a listener accepts. Made once before listening, so that a
/// certificate or key that cannot be used is reported before any client comes.
///
/// After `init` the context is only read (each connection takes a reference), which
/// OpenSSL allows from any thread.
public final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer
    public let options: TLSServerOptions
    /// Whether clients must present a certificate (`clientCAFile` given).
    public var requiresClientCertificate: Bool { options.clientCAFile != nil }

    /// Loads OpenSSL, the certificate chain and key (checking that they match), the
    /// minimum version, and for mutual TLS the client CA file.
    /// - Throws: `.libraryMissing`, `.setup`, `.certificateFile`, `.keyNeedsPassphrase`,
    ///   `.wrongPassphrase`, `.keyMismatch`, `.noPrivateKey`, `.keyFile`, or `.trustStore`
    ///   for a client CA file that cannot be loaded.
    public init(_ options: TLSServerOptions) throws(TLSFailure) {
        try loadOpenSSL()
        let context = try TLSStream.newContext(wsp_TLS_server_method(), minimum: options.minimumVersion)
        var ok = false
        defer { if !ok { wsp_SSL_CTX_free(context) } }
        wsp_SSL_CTX_set_server_options(context)
        try TLSStream.loadCertificate(chain: options.certificateFile, key: options.keyFile, password: options.keyPassword,
                                      into: context)
        if let caFile = options.clientCAFile {
            wsp_ERR_clear_error()
            guard wsp_SSL_CTX_require_client_certificates(context, caFile) == 1 else {
                throw .trustStore(path: caFile, reason: errorQueueText())
            }
        }
        ok = true
        self.context = context
        self.options = options
    }

    deinit { wsp_SSL_CTX_free(context) }
}

extension TLSStream {
    /// The server's side of a TLS connection over an accepted `carrier`, before its
    /// handshake: drive it with `acceptStep()` as the socket becomes ready.
    /// - Throws: `.setup` when OpenSSL cannot make the session.
    public static func accepting(over carrier: TCPStream, context server: TLSServerContext) throws(TLSFailure) -> TLSStream {
        guard let ssl = wsp_SSL_new(server.context) else { throw .setup(reason: errorQueueText()) }
        _ = wsp_SSL_CTX_up_ref(server.context)  // the stream frees its reference on close
        let stream = TLSStream(carrier: carrier, context: server.context, ssl: ssl)
        _ = wsp_SSL_set_fd(ssl, carrier.fileDescriptor)
        _ = wsp_SSL_set_nonblocking_modes(ssl)
        stream.readsAhead = true  // the server context reads ahead
        return stream
    }

    /// One non-blocking step of the server's handshake: `.done(0)` once it is complete
    /// (`summary` and `peerSubject` are then set), `.wouldBlock` to wait for the socket,
    /// `.endOfStream` when the client hung up, `.failed` with OpenSSL's reason (not TLS, no
    /// common version, a client certificate missing or refused).
    public func acceptStep() -> IOResult {
        let result = drive { wsp_SSL_accept(ssl) }
        guard case .done = result else {
            if case .failed(.closed) = result { return .endOfStream }
            if case .failed(.tlsSessionClosed) = result { return .endOfStream }
            return result
        }
        let version = wsp_SSL_get_version(ssl).map { String(cString: $0) } ?? "TLS"
        let cipher = wsp_SSL_cipher_name(ssl).map { String(cString: $0) } ?? ""
        summary = "\(version) \(cipher)"
        return .done(0)
    }

    /// The subject of the client's certificate (RFC 2253: "CN=client,O=Example"), nil
    /// when it sent none. Under `requiresClientCertificate`, a completed handshake means
    /// OpenSSL verified it.
    public var peerSubject: String? {
        var text = [CChar](repeating: 0, count: 1024)
        guard wsp_SSL_peer_subject(ssl, &text, text.count) >= 0 else { return nil }
        return cString(text)
    }
}

import COpenSSL
import CTLSShims
import Glibc

/// Lowest TLS version accepted (`--tls-min`).
public enum TLSVersion: String, Sendable, CaseIterable {
    /// TLS 1.2 (RFC 5246) and later.
    case tls12 = "1.2"
    /// TLS 1.3 (RFC 8446) only.
    case tls13 = "1.3"

    /// The version written "1.2" or "1.3" (`--tls-min`'s values); nil for any other text.
    // Written out, not synthesized, so that it has a documentation comment (WSKit's DocC).
    public init?(rawValue: String) {
        guard let version = TLSVersion.allCases.first(where: { $0.rawValue == rawValue }) else { return nil }
        self = version
    }
}

/// A client certificate and its private key (`--cert`, `--key`), PEM files.
public struct ClientCertificate: Sendable, Equatable, CustomStringConvertible {
    /// The certificate, optionally followed by its chain.
    public var certificateFile: String
    /// The private key (may be the same file as the certificate).
    public var keyFile: String
    /// The passphrase of an encrypted key; nil: none. Never printed.
    public var keyPassword: [UInt8]?

    public init(certificateFile: String, keyFile: String, keyPassword: [UInt8]? = nil) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.keyPassword = keyPassword
    }

    public var description: String {
        "certificate \(certificateFile), key \(keyFile)\(keyPassword == nil ? "" : " (passphrase given)")"
    }
}

/// How a TLS connection is set up and checked.
public struct TLSOptions: Sendable {
    /// Name for SNI and certificate verification: the URL's host, or `--sni`.
    public var serverName: String
    /// Whether `serverName` is an IP literal (no SNI; the certificate must name the IP).
    public var serverNameIsIP: Bool
    /// Verify the certificate chain and name (default). `false` is `-k/--insecure`.
    public var verifyPeer: Bool = true
    /// PEM file of trusted CA certificates used instead of the system store (`--cacert`).
    /// Without it the system store is used, honouring SSL_CERT_FILE and SSL_CERT_DIR.
    public var caFile: String?
    /// Sent when the server asks for one (mutual TLS).
    public var clientCertificate: ClientCertificate?
    public var minimumVersion: TLSVersion = .tls12
    /// Appended to a handshake failure that looks like a peer that does not speak TLS (it
    /// answered the ClientHello with something else, or hung up): what the user should try.
    public var plainPeerHint: String
    /// The hint for an https:// proxy: a plain HTTP proxy written as https:// (a common
    /// slip in proxy variables) answers the TLS ClientHello with HTTP, or not at all.
    public static let plainHTTPProxyHint = " (if it is a plain HTTP proxy, write http:// in its URL)"

    public init(serverName: String, serverNameIsIP: Bool, verifyPeer: Bool = true, caFile: String? = nil,
                clientCertificate: ClientCertificate? = nil, minimumVersion: TLSVersion = .tls12,
                plainPeerHint: String = " (is it a plain server? use ws:// for one)") {
        self.serverName = serverName
        self.serverNameIsIP = serverNameIsIP
        self.verifyPeer = verifyPeer
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.minimumVersion = minimumVersion
        self.plainPeerHint = plainPeerHint
    }
}

/// Why TLS could not be set up or the server was not accepted, as facts: which file,
/// which certificate check, OpenSSL's reason. The bridge says what the user can do.
public enum TLSFailure: Error, Equatable, Sendable {
    /// libssl could not be loaded (dlopen's message).
    case libraryMissing(String)
    /// OpenSSL could not create a context or session.
    case setup(reason: String)
    /// The CA file (`path`) or the system CA store (nil) cannot be loaded.
    case trustStore(path: String?, reason: String)
    /// The client certificate file cannot be loaded.
    case certificateFile(path: String, reason: String)
    /// The client key is encrypted and no passphrase was given.
    case keyNeedsPassphrase(path: String)
    case wrongPassphrase(path: String)
    case keyMismatch(key: String, certificate: String)
    /// No key in the certificate's file (no separate key file was given).
    case noPrivateKey(path: String, reason: String)
    case keyFile(path: String, reason: String)
    /// The server's certificate failed `check` for `name`; `detail` is OpenSSL's text.
    case verification(CertificateCheck, name: String, detail: String)
    /// The server asked for a client certificate we do not have and ended the handshake.
    case certificateRequired(detail: String)
    /// After the handshake: the server asked for a certificate we lack and hung up.
    case certificateRequiredThenClosed
    /// After the handshake: we sent a certificate and the server hung up without a word.
    case certificateProbablyRefused
    /// The peer closed the connection during the handshake; `hint` says what to try.
    case closedDuringHandshake(hint: String)
    /// The handshake failed; `hint` when the peer looks like it does not speak TLS.
    case handshakeFailed(StreamFailure, hint: String?)
    /// TLS failed on the first read or write after the handshake (TLS 1.3 servers refuse a
    /// client certificate then).
    case alert(TLSAlert)
}

/// Which check the server's certificate failed.
public enum CertificateCheck: Equatable, Sendable {
    case expired, notYetValid, nameMismatch, unknownCA, other
    /// Signed by itself, and not trusted.
    case selfSigned
    /// Its extended key usage does not include TLS servers (a client certificate served).
    case notForServers
    /// A certificate of the chain signs others without being a CA's (basicConstraints).
    case issuerNotCA
    /// A key or signature digest the security level refuses (RSA under 2048 bits, SHA-1).
    case tooWeak
}

/// A TLS error on an open stream, classified from OpenSSL's reason (`detail`).
public enum TLSAlert: Equatable, Sendable, CustomStringConvertible {
    /// The server requires a client certificate and none was sent.
    case certificateRequired(detail: String)
    /// The server refused the client certificate sent.
    case certificateRefused(detail: String)
    /// A handshake failure alert without a certificate sent: no common cipher, or a
    /// certificate wanted.
    case handshakeRefused(detail: String)
    /// No protocol version both sides accept.
    case noCommonVersion(detail: String)
    case other(detail: String)

    public var detail: String {
        switch self {
        case .certificateRequired(let d), .certificateRefused(let d), .handshakeRefused(let d), .noCommonVersion(let d),
             .other(let d): return d
        }
    }

    public var description: String {
        switch self {
        case .certificateRequired(let d): return "the server requires a client certificate [\(d)]"
        case .certificateRefused(let d): return "the server refused the client certificate [\(d)]"
        case .handshakeRefused(let d): return "the server ended the handshake (no common protocol or cipher, or it wants a client certificate) [\(d)]"
        case .noCommonVersion(let d): return "no TLS version that both sides accept [\(d)]"
        case .other(let d): return d
        }
    }
}

/// TLS 1.2+ with system OpenSSL, over a non-blocking TCP connection or over another
/// `ByteStream` (the tunnel through an HTTPS proxy: TLS inside TLS).
///
/// Over TCP, OpenSSL reads and writes the socket itself. Over another stream it works on
/// one end of a BIO pair and this class moves the bytes between the other end and the
/// carrier stream; poll(2) still watches the carrier's socket.
///
/// Small writes are gathered into one record-sized buffer (16 KiB) so that a frame header
/// and its payload, or many small frames, do not each become a TLS record. The object is
/// owned by one thread; the `SSL*` is never touched concurrently.
public final class TLSStream: ByteStream {
    private let carrier: ByteStream
    private let context: OpaquePointer
    let ssl: OpaquePointer
    private let staging: UnsafeMutableRawPointer
    private var stagedCount = 0
    private var closed = false
    /// Largest TLS record payload (RFC 8446 §5.1).
    private static let recordSize = 16 * 1024
    // Over a stream: our end of the BIO pair, and ciphertext on its way to the carrier.
    private var network: OpaquePointer?
    private var outgoing: UnsafeMutableRawPointer?
    private var outgoingStart = 0
    private var outgoingEnd = 0
    private static let pairSize = 64 * 1024
    /// OpenSSL reads ahead (server streams): whole records it holds are invisible to poll,
    /// so `read` takes records until OpenSSL must wait for the socket or the buffer is full.
    var readsAhead = false
    /// Whether a client certificate was configured (and so sent if the server asked).
    public private(set) var sentClientCertificate = false
    /// Set by OpenSSL (through a callback) when the server asked for a certificate we lack.
    private let certificateRequested = UnsafeMutablePointer<Int32>.allocate(capacity: 1)

    /// Whether the server asked for a client certificate and none was configured: a server
    /// that then closes the connection wants one (`--cert`).
    public var serverWantedCertificate: Bool { certificateRequested.pointee != 0 }

    public var fileDescriptor: Int32 { carrier.fileDescriptor }
    /// Protocol version and cipher, for -v ("TLSv1.3 TLS_AES_256_GCM_SHA384").
    public internal(set) var summary = ""

    init(carrier: ByteStream, context: OpaquePointer, ssl: OpaquePointer) {
        self.carrier = carrier
        self.context = context
        self.ssl = ssl
        staging = UnsafeMutableRawPointer.allocate(byteCount: TLSStream.recordSize, alignment: 16)
        certificateRequested.initialize(to: 0)
    }

    deinit {
        close()
        staging.deallocate()
        certificateRequested.deallocate()
        outgoing?.deallocate()
    }

    /// Runs the TLS handshake over `carrier` before `deadline`. Throws `.tls` with the
    /// reason (certificate expired, wrong host, unknown CA, client certificate refused,
    /// protocol failure) or `.timedOut`. `names` words what `log` gets.
    public static func connect(over carrier: ByteStream, options: TLSOptions, deadline: Deadline, names: SettingNames,
                               log: (String) -> Void = { _ in }) throws(TransportError) -> TLSStream {
        let context: OpaquePointer
        do throws(TLSFailure) {
            try loadOpenSSL()
            context = try makeContext(options, log: log)
        } catch {
            throw .tls(error)
        }
        guard let ssl = wsp_SSL_new(context) else {
            wsp_SSL_CTX_free(context)
            throw .tls(.setup(reason: errorQueueText()))
        }
        let stream = TLSStream(carrier: carrier, context: context, ssl: ssl)
        stream.sentClientCertificate = options.clientCertificate != nil
        if !stream.sentClientCertificate {
            stream.certificateRequested.withMemoryRebound(to: CInt.self, capacity: 1) {
                wsp_SSL_track_certificate_request(context, ssl, $0)
            }
        }
        if carrier is TCPStream {
            _ = wsp_SSL_set_fd(ssl, carrier.fileDescriptor)
        } else {
            var network: OpaquePointer?
            guard wsp_SSL_set_bio_pair(ssl, &network, TLSStream.pairSize) == 1, let network else {
                throw .tls(.setup(reason: errorQueueText()))
            }
            stream.network = network
            stream.outgoing = UnsafeMutableRawPointer.allocate(byteCount: TLSStream.pairSize, alignment: 16)
        }
        _ = wsp_SSL_set_nonblocking_modes(ssl)
        if options.serverNameIsIP {
            if options.verifyPeer {
                _ = wsp_SSL_set1_ip(ssl, options.serverName)
            }
        } else {
            _ = wsp_SSL_set_tlsext_host_name(ssl, options.serverName)
            if options.verifyPeer {
                _ = wsp_SSL_set1_host(ssl, options.serverName)
            }
        }

        while true {
            let result = stream.drive { wsp_SSL_connect(ssl) }
            let interest: PollInterest
            switch result {
            case .done:
                _ = stream.pushOut()  // the last flight; the rest goes with the first write
                let version = wsp_SSL_get_version(ssl).map { String(cString: $0) } ?? "TLS"
                let cipher = wsp_SSL_cipher_name(ssl).map { String(cString: $0) } ?? ""
                stream.summary = "\(version) \(cipher)"
                log("TLS established: \(stream.summary)\(options.verifyPeer ? "" : " (certificate not verified: \(names.verificationOff))")")
                return stream
            case .wouldBlock(let wanted):
                interest = wanted
            case .endOfStream:
                throw .tls(.closedDuringHandshake(hint: options.plainPeerHint))
            case .failed(let why):
                let verify = wsp_SSL_get_verify_result(ssl)
                if options.verifyPeer && verify != Int(X509_V_OK) {
                    throw .tls(verificationFailure(Int32(verify), name: options.serverName))
                }
                if stream.serverWantedCertificate {
                    switch why {
                    case .tls(.certificateRequired), .tls(.certificateRefused), .tls(.handshakeRefused): break
                    case .tls(let alert): throw .tls(.certificateRequired(detail: alert.detail))
                    default: throw .tls(.certificateRequired(detail: why.description))
                    }
                }
                if why == .closed { throw .tls(.closedDuringHandshake(hint: options.plainPeerHint)) }
                // What OpenSSL says when the answer to its hello is not TLS, or is a hang-up.
                let text: String
                if case .tls(let alert) = why { text = alert.detail } else { text = why.description }
                let notTLS = why == .tlsSessionClosed || ["wrong version number", "packet length too long",
                    "record layer failure", "http request", "unexpected eof", "closed the connection"].contains { text.contains($0) }
                throw .tls(.handshakeFailed(why, hint: notTLS ? options.plainPeerHint : nil))
            }
            if stream.network != nil && carrier.hasBufferedInput { continue }
            try carrier.wait(for: interest, until: deadline, stage: .tlsHandshake(proxy: nil))
        }
    }

    /// A context for `method` (client or server) accepting `minimum` and up, in which a
    /// peer dropping TCP without close_notify reads as end of stream.
    static func newContext(_ method: OpaquePointer?, minimum: TLSVersion) throws(TLSFailure) -> OpaquePointer {
        guard let context = wsp_SSL_CTX_new(method) else { throw .setup(reason: errorQueueText()) }
        _ = wsp_SSL_CTX_set_min_proto_version(context, minimum == .tls13 ? wsp_TLS1_3_VERSION() : wsp_TLS1_2_VERSION())
        wsp_SSL_CTX_ignore_unexpected_eof(context)
        return context
    }

    private static func makeContext(_ options: TLSOptions, log: (String) -> Void) throws(TLSFailure) -> OpaquePointer {
        let context = try newContext(wsp_TLS_client_method(), minimum: options.minimumVersion)
        var ok = false
        defer { if !ok { wsp_SSL_CTX_free(context) } }
        if options.verifyPeer {
            wsp_SSL_CTX_set_verify(context, SSL_VERIFY_PEER)
            if let caFile = options.caFile {
                guard wsp_SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                    throw .trustStore(path: caFile, reason: errorQueueText())
                }
            } else if wsp_SSL_CTX_set_default_verify_paths(context) != 1 {
                throw .trustStore(path: nil, reason: errorQueueText())
            }
        } else {
            wsp_SSL_CTX_set_verify(context, SSL_VERIFY_NONE)
        }
        if let client = options.clientCertificate {
            try loadClientCertificate(client, into: context)
            log("client certificate: \(client.certificateFile)")
        }
        // ALPN: only HTTP/1.1 can carry the upgrade; this keeps h2-first servers from choosing h2.
        let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
        _ = alpn.withUnsafeBufferPointer { wsp_SSL_CTX_set_alpn_protos(context, $0.baseAddress, UInt32($0.count)) }
        ok = true
        return context
    }

    private static func loadClientCertificate(_ client: ClientCertificate, into context: OpaquePointer) throws(TLSFailure) {
        try loadCertificate(chain: client.certificateFile, key: client.keyFile, password: client.keyPassword, into: context)
    }

    /// Loads a PEM certificate chain and its private key (decrypted with `password`, never
    /// a prompt) into `context` and checks that they belong together: the client's
    /// certificate, or a server's own.
    static func loadCertificate(chain certificateFile: String, key keyFile: String, password keyPassword: [UInt8]?,
                                into context: OpaquePointer) throws(TLSFailure) {
        wsp_ERR_clear_error()
        guard wsp_SSL_CTX_use_certificate_chain_file_no_prompt(context, certificateFile) == 1 else {
            throw .certificateFile(path: certificateFile, reason: errorQueueText())
        }
        var asked: Int32 = 0
        var password = keyPassword ?? []
        let loaded = password.withUnsafeMutableBufferPointer { buffer -> Int32 in
            let result = buffer.baseAddress.map { base in
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { chars in
                    wsp_SSL_CTX_use_PrivateKey_file_with_password(context, keyFile, chars, buffer.count, &asked)
                }
            } ?? wsp_SSL_CTX_use_PrivateKey_file_with_password(context, keyFile, nil, 0, &asked)
            if let base = buffer.baseAddress { wsp_OPENSSL_cleanse(base, buffer.count) }
            return result
        }
        guard loaded == 1 else {
            let queued = errorQueueText()
            // Decrypted but not the certificate's: a mismatch, however right the passphrase.
            if queued.contains("key values mismatch") {
                throw .keyMismatch(key: keyFile, certificate: certificateFile)
            }
            if asked != 0 && keyPassword == nil {
                throw .keyNeedsPassphrase(path: keyFile)
            }
            if asked != 0 {
                throw .wrongPassphrase(path: keyFile)
            }
            if keyFile == certificateFile && (queued.contains("PEM lib") || queued.contains("no start line")) {
                // --cert without --key: the key is looked for in the certificate's file.
                throw .noPrivateKey(path: keyFile, reason: queued)
            }
            throw .keyFile(path: keyFile, reason: queued)
        }
        guard wsp_SSL_CTX_check_private_key(context) == 1 else {
            throw .keyMismatch(key: keyFile, certificate: certificateFile)
        }
    }

    // MARK: - ByteStream

    public func read(into buffer: UnsafeMutableRawPointer, count: Int) -> IOResult {
        guard readsAhead else { return drive(closedIsEnd: true) { wsp_SSL_read(ssl, buffer, Int32(min(count, Int(Int32.max)))) } }
        var total = 0
        while total < count {
            let result = drive(closedIsEnd: true) { wsp_SSL_read(ssl, buffer + total, Int32(min(count - total, Int(Int32.max)))) }
            guard case .done(let n) = result else { return total > 0 ? .done(total) : result }  // an end repeats next time
            total += n
        }
        return .done(total)
    }

    public func write(_ vectors: UnsafePointer<iovec>, count: Int) -> IOResult {
        if stagedCount > 0 {
            switch flush() {
            case .done: break
            case let other: return other
            }
        }
        guard count > 0 else { return .done(0) }
        let first = vectors[0]
        if first.iov_len >= TLSStream.recordSize {
            return drive(closedIsEnd: false) { wsp_SSL_write(ssl, first.iov_base, Int32(min(first.iov_len, Int(Int32.max)))) }
        }
        // Gather small pieces into one record.
        var total = 0
        for i in 0..<count {
            let piece = vectors[i]
            let room = TLSStream.recordSize - total
            if room == 0 { break }
            let take = min(room, piece.iov_len)
            if take > 0, let base = piece.iov_base { (staging + total).copyMemory(from: base, byteCount: take) }
            total += take
            if take < piece.iov_len { break }
        }
        stagedCount = total
        switch flush() {
        case .done, .wouldBlock: return .done(total)
        case let other: return other
        }
    }

    /// Writes the staged record (retries use the same buffer and length, as OpenSSL asks),
    /// then, over a stream, pushes the ciphertext on to the carrier.
    public func flush() -> IOResult {
        while stagedCount > 0 {
            let result = drive(closedIsEnd: false) { wsp_SSL_write(ssl, staging, Int32(stagedCount)) }
            guard case .done(let written) = result else { return result }
            if written < stagedCount {
                staging.copyMemory(from: staging + written, byteCount: stagedCount - written)
            }
            stagedCount -= written
        }
        if network != nil { return pushOut() }
        return .done(0)
    }

    public var hasBufferedInput: Bool {
        // Decrypted bytes only: a record still arriving (SSL_has_pending) is the socket's to
        // announce, and counting it made every wait return at once (a busy loop).
        if wsp_SSL_pending(ssl) > 0 { return true }
        guard let network else { return false }
        return wsp_BIO_ctrl_wpending(network) > 0 || carrier.hasBufferedInput
    }

    public var hasPendingOutput: Bool {
        if stagedCount > 0 { return true }
        guard let network else { return false }
        return outgoingEnd > outgoingStart || wsp_BIO_ctrl_pending(network) > 0 || carrier.hasPendingOutput
    }

    public func shutdownOutput() {
        guard !closed else { return }
        wsp_ERR_clear_error()
        _ = wsp_SSL_shutdown(ssl)  // sends close_notify; the answer is not awaited
        if network != nil { _ = pushOut() }
        carrier.shutdownOutput()
    }

    public func close() {
        guard !closed else { return }
        closed = true
        wsp_SSL_free(ssl)  // and the internal half of a BIO pair
        if let network { wsp_BIO_free(network) }
        wsp_SSL_CTX_free(context)
        carrier.close()
    }

    // MARK: - Driving OpenSSL

    /// Runs an SSL call until it succeeds or must wait. Over a stream, moves ciphertext
    /// between the BIO pair and the carrier as OpenSSL asks.
    func drive(closedIsEnd: Bool = false, _ operation: () -> Int32) -> IOResult {
        while true {
            wsp_ERR_clear_error()
            let n = operation()
            let code = errno
            if n > 0 {
                if network != nil { _ = pushOut() }
                return .done(Int(n))
            }
            let error = wsp_SSL_get_error(ssl, n)
            guard network != nil, error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE else {
                return outcome(error, errnoCode: code, closedIsEnd: closedIsEnd)
            }
            let pushed = pushOut()
            if case .failed = pushed { return pushed }
            if error == SSL_ERROR_WANT_WRITE {
                if case .done = pushed { continue }
                return pushed
            }
            switch pullIn() {
            case .done: continue
            case .wouldBlock(let interest): return .wouldBlock(interest)
            case .endOfStream: return closedIsEnd ? .endOfStream : .failed(.closed)
            case .failed(let why): return .failed(why)
            }
        }
    }

    /// Over a stream: ciphertext from the BIO pair to the carrier, as far as it takes it.
    /// `.done(0)` when nothing is left.
    private func pushOut() -> IOResult {
        guard let network, let outgoing else { return .done(0) }
        while true {
            if outgoingEnd > outgoingStart {
                var vector = iovec(iov_base: outgoing + outgoingStart, iov_len: outgoingEnd - outgoingStart)
                switch carrier.write(&vector, count: 1) {
                case .done(let n): outgoingStart += n
                case .endOfStream: return .failed(.closed)
                case let other: return other
                }
                continue
            }
            outgoingStart = 0
            outgoingEnd = 0
            let available = wsp_BIO_ctrl_pending(network)
            if available == 0 { break }
            let n = wsp_BIO_read(network, outgoing, Int32(min(available, TLSStream.pairSize)))
            if n <= 0 { break }
            outgoingEnd = Int(n)
        }
        return carrier.hasPendingOutput ? carrier.flush() : .done(0)
    }

    /// Over a stream: ciphertext from the carrier into the BIO pair.
    private func pullIn() -> IOResult {
        guard let network else { return .done(0) }
        let room = min(wsp_BIO_ctrl_get_write_guarantee(network), TLSStream.recordSize + 512)
        guard room > 0 else { return .failed(.tlsBufferFull) }
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: room, alignment: 16)
        defer { scratch.deallocate() }
        let result = carrier.read(into: scratch, count: room)
        if case .done(let n) = result { _ = wsp_BIO_write(network, scratch, Int32(n)) }
        return result
    }

    private func outcome(_ error: Int32, errnoCode code: Int32, closedIsEnd: Bool) -> IOResult {
        switch error {
        case SSL_ERROR_WANT_READ: return .wouldBlock(.read)
        case SSL_ERROR_WANT_WRITE: return .wouldBlock(.write)
        case SSL_ERROR_ZERO_RETURN: return closedIsEnd ? .endOfStream : .failed(.tlsSessionClosed)
        case SSL_ERROR_SYSCALL:
            let queued = errorQueueText()
            if queued != "unknown error" { return .failed(.tls(classify(queued))) }
            if code == 0 { return closedIsEnd ? .endOfStream : .failed(.closed) }
            return .failed(.system(errno: code))
        default:
            return .failed(.tls(classify(errorQueueText())))
        }
    }

    /// What an OpenSSL reason means here.
    private func classify(_ queued: String) -> TLSAlert {
        if queued.contains("certificate required") || (serverWantedCertificate && queued.contains("handshake failure")) {
            return .certificateRequired(detail: queued)
        }
        if sentClientCertificate && ["bad certificate", "unknown ca", "certificate unknown", "unsupported certificate",
                                     "certificate revoked", "certificate expired", "access denied"].contains(where: queued.contains) {
            return .certificateRefused(detail: queued)
        }
        if !sentClientCertificate && queued.contains("alert handshake failure") { return .handshakeRefused(detail: queued) }
        if ["unsupported protocol", "protocol version", "no protocols available"].contains(where: queued.contains) {
            return .noCommonVersion(detail: queued)
        }
        return .other(detail: queued)
    }
}

/// Loads OpenSSL on first use (it is not linked; see CTLSShims). Throws `.tls` if the
/// library is missing.
func loadOpenSSL() throws(TLSFailure) {
    var error = [CChar](repeating: 0, count: 512)
    if wsp_tls_load(&error, error.count) != 0 { throw .libraryMissing(cString(error)) }
}

/// The OpenSSL error queue as one line (emptied), or "unknown error".
func errorQueueText() -> String {
    var parts: [String] = []
    while true {
        let code = wsp_ERR_get_error()
        if code == 0 { break }
        var text = [CChar](repeating: 0, count: 256)
        wsp_ERR_error_string_n(code, &text, text.count)
        let line = cString(text)
        // "error:0A000086:SSL routines::certificate verify failed" -> the reason part.
        parts.append(line.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) ?? line)
    }
    return parts.isEmpty ? "unknown error" : parts.joined(separator: "; ")
}

/// A certificate verification failure: which check, for which name, OpenSSL's words.
func verificationFailure(_ code: Int32, name: String) -> TLSFailure {
    let detail = wsp_X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
    let check: CertificateCheck
    switch code {
    case X509_V_ERR_CERT_HAS_EXPIRED: check = .expired
    case X509_V_ERR_CERT_NOT_YET_VALID: check = .notYetValid
    case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: check = .nameMismatch
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT: check = .selfSigned
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
         X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        check = .unknownCA
    case X509_V_ERR_INVALID_PURPOSE: check = .notForServers
    case X509_V_ERR_INVALID_CA: check = .issuerNotCA
    case X509_V_ERR_EE_KEY_TOO_SMALL, X509_V_ERR_CA_KEY_TOO_SMALL, X509_V_ERR_CA_MD_TOO_WEAK: check = .tooWeak
    default: check = .other
    }
    return .verification(check, name: name, detail: detail)
}

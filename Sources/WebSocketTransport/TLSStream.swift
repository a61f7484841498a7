import COpenSSL
import CTLSShims
import Glibc

/// How a TLS connection is set up and checked.
public struct TLSOptions: Sendable {
    /// Name for SNI and certificate verification: the URL's host.
    public var serverName: String
    /// Whether `serverName` is an IP literal (no SNI; the certificate must name the IP).
    public var serverNameIsIP: Bool
    /// Verify the certificate chain and name (default). `false` is `-k/--insecure`.
    public var verifyPeer: Bool = true
    /// PEM file of trusted CA certificates used instead of the system store (`--cacert`).
    /// Without it the system store is used, honouring SSL_CERT_FILE and SSL_CERT_DIR.
    public var caFile: String?

    public init(serverName: String, serverNameIsIP: Bool, verifyPeer: Bool = true, caFile: String? = nil) {
        self.serverName = serverName
        self.serverNameIsIP = serverNameIsIP
        self.verifyPeer = verifyPeer
        self.caFile = caFile
    }
}

/// TLS 1.2+ over a non-blocking TCP connection, with system OpenSSL.
///
/// Small writes are gathered into one record-sized buffer (16 KiB) so that a frame header
/// and its payload, or many small frames, do not each become a TLS record. The object is
/// owned by one thread; the `SSL*` is never touched concurrently.
public final class TLSStream: ByteStream {
    private let tcp: TCPStream
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let staging: UnsafeMutableRawPointer
    private var stagedCount = 0
    private var closed = false
    /// Largest TLS record payload (RFC 8446 §5.1).
    private static let recordSize = 16 * 1024

    public var fileDescriptor: Int32 { tcp.fileDescriptor }
    /// Protocol version and cipher, for -v ("TLSv1.3 TLS_AES_256_GCM_SHA384").
    public private(set) var summary = ""

    private init(tcp: TCPStream, context: OpaquePointer, ssl: OpaquePointer) {
        self.tcp = tcp
        self.context = context
        self.ssl = ssl
        staging = UnsafeMutableRawPointer.allocate(byteCount: TLSStream.recordSize, alignment: 16)
    }

    deinit {
        close()
        staging.deallocate()
    }

    /// Runs the TLS handshake over `tcp` before `deadline`. Throws `.tls` with the reason
    /// (certificate expired, wrong host, unknown CA, protocol failure) or `.timedOut`.
    public static func connect(over tcp: TCPStream, options: TLSOptions, deadline: Instant, timeoutSeconds: Double,
                               log: (String) -> Void = { _ in }) throws(TransportError) -> TLSStream {
        try loadOpenSSL()
        guard let context = wsp_SSL_CTX_new(wsp_TLS_client_method()) else { throw .tls("cannot create a TLS context: \(errorQueueText())") }
        _ = wsp_SSL_CTX_set_min_proto_version(context, wsp_TLS1_2_VERSION())
        wsp_SSL_CTX_ignore_unexpected_eof(context)
        if options.verifyPeer {
            wsp_SSL_CTX_set_verify(context, SSL_VERIFY_PEER)
            if let caFile = options.caFile {
                guard wsp_SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                    wsp_SSL_CTX_free(context)
                    throw .tls("cannot load CA certificates from '\(caFile)': \(errorQueueText())")
                }
            } else if wsp_SSL_CTX_set_default_verify_paths(context) != 1 {
                wsp_SSL_CTX_free(context)
                throw .tls("cannot load the system CA store: \(errorQueueText())")
            }
        } else {
            wsp_SSL_CTX_set_verify(context, SSL_VERIFY_NONE)
        }
        // ALPN: only HTTP/1.1 can carry the upgrade; this keeps h2-first servers from choosing h2.
        let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
        _ = alpn.withUnsafeBufferPointer { wsp_SSL_CTX_set_alpn_protos(context, $0.baseAddress, UInt32($0.count)) }

        guard let ssl = wsp_SSL_new(context) else {
            wsp_SSL_CTX_free(context)
            throw .tls("cannot create a TLS session: \(errorQueueText())")
        }
        let stream = TLSStream(tcp: tcp, context: context, ssl: ssl)
        _ = wsp_SSL_set_fd(ssl, tcp.fileDescriptor)
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
            wsp_ERR_clear_error()
            let result = wsp_SSL_connect(ssl)
            if result == 1 { break }
            let error = wsp_SSL_get_error(ssl, result)
            let interest: PollInterest
            switch error {
            case SSL_ERROR_WANT_READ: interest = .read
            case SSL_ERROR_WANT_WRITE: interest = .write
            default:
                let verify = wsp_SSL_get_verify_result(ssl)
                if options.verifyPeer && verify != Int(X509_V_OK) {
                    throw .tls(verificationMessage(Int32(verify), name: options.serverName))
                }
                if error == SSL_ERROR_SYSCALL {
                    let code = errno
                    let queued = errorQueueText()
                    if queued != "unknown error" { throw .tls("handshake failed: \(queued)") }
                    throw .tls(code == 0 ? "the server closed the connection during the TLS handshake"
                                         : "handshake failed: \(errnoText(code))")
                }
                throw .tls("handshake failed: \(errorQueueText())")
            }
            var entry = pollfd(fd: tcp.fileDescriptor, events: interest.pollEvents, revents: 0)
            let ready = poll(&entry, 1, deadline.pollTimeout())
            if ready == 0 { throw .timedOut(stage: "in the TLS handshake", seconds: timeoutSeconds) }
        }
        let version = wsp_SSL_get_version(ssl).map { String(cString: $0) } ?? "TLS"
        let cipher = wsp_SSL_cipher_name(ssl).map { String(cString: $0) } ?? ""
        stream.summary = "\(version) \(cipher)"
        log("TLS established: \(stream.summary)\(options.verifyPeer ? "" : " (certificate not verified: --insecure)")")
        return stream
    }

    public func read(into buffer: UnsafeMutableRawPointer, count: Int) -> IOResult {
        wsp_ERR_clear_error()
        let n = wsp_SSL_read(ssl, buffer, Int32(min(count, Int(Int32.max))))
        if n > 0 { return .done(Int(n)) }
        return outcome(of: n, closedIsEnd: true)
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
            wsp_ERR_clear_error()
            let n = wsp_SSL_write(ssl, first.iov_base, Int32(min(first.iov_len, Int(Int32.max))))
            if n > 0 { return .done(Int(n)) }
            return outcome(of: n, closedIsEnd: false)
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

    /// Writes the staged record. Retries use the same buffer and length, as OpenSSL asks.
    public func flush() -> IOResult {
        while stagedCount > 0 {
            wsp_ERR_clear_error()
            let n = wsp_SSL_write(ssl, staging, Int32(stagedCount))
            if n <= 0 { return outcome(of: n, closedIsEnd: false) }
            let written = Int(n)
            if written < stagedCount {
                (staging).copyMemory(from: staging + written, byteCount: stagedCount - written)
            }
            stagedCount -= written
        }
        return .done(0)
    }

    public var hasBufferedInput: Bool { wsp_SSL_has_pending(ssl) != 0 }
    public var hasPendingOutput: Bool { stagedCount > 0 }

    public func shutdownOutput() {
        guard !closed else { return }
        wsp_ERR_clear_error()
        _ = wsp_SSL_shutdown(ssl)  // sends close_notify; the answer is not awaited
        tcp.shutdownOutput()
    }

    public func close() {
        guard !closed else { return }
        closed = true
        wsp_SSL_free(ssl)
        wsp_SSL_CTX_free(context)
        tcp.close()
    }

    private func outcome(of result: Int32, closedIsEnd: Bool) -> IOResult {
        let code = errno
        switch wsp_SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wouldBlock(.read)
        case SSL_ERROR_WANT_WRITE: return .wouldBlock(.write)
        case SSL_ERROR_ZERO_RETURN: return closedIsEnd ? .endOfStream : .failed("the server closed the TLS session")
        case SSL_ERROR_SYSCALL:
            let queued = errorQueueText()
            if queued != "unknown error" { return .failed("TLS: \(queued)") }
            if code == 0 { return closedIsEnd ? .endOfStream : .failed("connection closed") }
            return .failed(errnoText(code))
        default:
            return .failed("TLS: \(errorQueueText())")
        }
    }
}

/// Loads OpenSSL on first use (it is not linked; see CTLSShims). Throws `.tls` if the
/// library is missing.
func loadOpenSSL() throws(TransportError) {
    var error = [CChar](repeating: 0, count: 512)
    if wsp_tls_load(&error, error.count) != 0 { throw .tls(cString(error)) }
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

/// A certificate verification failure in words a user can act on.
func verificationMessage(_ code: Int32, name: String) -> String {
    let detail = wsp_X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
    let reason: String
    switch code {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        reason = "the server's certificate has expired"
    case X509_V_ERR_CERT_NOT_YET_VALID:
        reason = "the server's certificate is not valid yet"
    case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
        reason = "the server's certificate is not valid for '\(name)'"
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
         X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
         X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        reason = "the server's certificate is signed by an unknown CA (trust it with --cacert FILE)"
    default:
        reason = "the server's certificate was refused"
    }
    return "certificate verification failed for '\(name)': \(reason) [\(detail)]; -k/--insecure skips verification"
}

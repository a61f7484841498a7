// TLS failures as a shell user reads them: the certificate checks and the PEM files that
// OpenSSL refuses, worded, OpenSSL's own reason kept in brackets.
import COpenSSL
import XCTest
@testable import WebSocketTransport

final class TLSSentenceTests: XCTestCase {
    private let names = SettingNames(
        proxySource: { _ in nil }, ipv4Only: nil, ipv6Only: nil, connectTimeout: "--connect-timeout", caFile: "--cacert FILE",
        insecure: "-k", keyPassphrase: "--key-pass-env", keyFile: "--key", clientCertificate: "--cert", certificate: "--cert",
        minimumVersion: nil, proxy: "--proxy", proxyOff: "--proxy ''", noProxy: "--noproxy", connectTo: "--connect-to",
        verificationOff: "-k")

    /// These were "the server's certificate was refused [unsuitable certificate purpose]"
    /// and the like (a self-signed one: "signed by an unknown CA").
    func testCertificateChecksAreWorded() throws {
        try loadOpenSSL()
        let cases: [(Int32, String)] = [
            (X509_V_ERR_INVALID_PURPOSE, "the server's certificate is not meant for a TLS server (its extended key usage lacks serverAuth)"),
            (X509_V_ERR_INVALID_CA, "the server's certificate is signed by a certificate that is no CA's (basicConstraints without CA:TRUE)"),
            (X509_V_ERR_EE_KEY_TOO_SMALL, "too weak for OpenSSL's security level (RSA under 2048 bits, SHA-1)"),
            (X509_V_ERR_CA_KEY_TOO_SMALL, "too weak for OpenSSL's security level"),
            (X509_V_ERR_CA_MD_TOO_WEAK, "too weak for OpenSSL's security level"),
            (X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, "the server's certificate is self-signed (trust that certificate itself with --cacert FILE)"),
            (X509_V_ERR_CERT_HAS_EXPIRED, "the server's certificate has expired"),
        ]
        for (code, words) in cases {
            let text = verificationFailure(code, name: "h").sentence(names)
            XCTAssertTrue(text.hasPrefix("certificate verification failed for 'h': ") && text.contains(words), text)
            XCTAssertFalse(text.contains("was refused"), text)
            XCTAssertTrue(text.contains(" [") && text.hasSuffix("]; -k skips verification"), "OpenSSL's words in brackets: \(text)")
        }
    }

    /// A server's alert was OpenSSL's reason alone ("handshake failed: tlsv1 unrecognized name").
    func testAlertsAreWorded() {
        let cases: [(String, String)] = [
            ("tlsv1 unrecognized name", "the server does not serve the name asked for (the TLS server name, SNI) [tlsv1 unrecognized name]"),
            ("tlsv1 alert access denied", "the server sent the TLS alert 'access denied' [tlsv1 alert access denied]"),
            ("tlsv1 alert internal error; x", "the server sent the TLS alert 'internal error' [tlsv1 alert internal error; x]"),
            ("unexpected eof while reading", "unexpected eof while reading"),
        ]
        for (detail, text) in cases {
            XCTAssertEqual(TLSAlert.other(detail: detail).sentence(names), text)
            XCTAssertEqual(TLSFailure.handshakeFailed(.tls(.other(detail: detail)), hint: nil).sentence(names), "handshake failed: " + text)
        }
    }

    /// OpenSSL's reasons for a file it cannot load ("no start line; PEM lib", "ee key too
    /// small") were the whole message.
    func testFilesOpenSSLRefusesAreWorded() {
        let cases: [(TLSFailure, String)] = [
            (.certificateFile(path: "c.der", reason: "no start line; PEM lib"),
             "cannot load the client certificate from 'c.der': it holds no certificate in PEM form (-----BEGIN CERTIFICATE-----) [no start line; PEM lib]"),
            (.trustStore(path: "k.pem", reason: "no certificate or crl found"),
             "cannot load CA certificates from 'k.pem': it holds no certificate in PEM form (-----BEGIN CERTIFICATE-----) [no certificate or crl found]"),
            (.keyFile(path: "c.pem", reason: "no start line; PEM lib"),
             "cannot load the private key from 'c.pem': it holds no private key in PEM form (-----BEGIN PRIVATE KEY-----) [no start line; PEM lib]"),
            (.keyFile(path: "j", reason: "unsupported; PEM lib"),
             "cannot load the private key from 'j': it holds no private key OpenSSL can read [unsupported; PEM lib]"),
            (.certificateFile(path: "w.pem", reason: "ee key too small"),
             "cannot load the client certificate from 'w.pem': its key is too small for OpenSSL's security level "
                + "(RSA needs 2048 bits or more) [ee key too small]"),
            (.certificateFile(path: "s.pem", reason: "ca md too weak"),
             "cannot load the client certificate from 's.pem': its signature's digest is too weak for OpenSSL's security "
                + "level (SHA-1, MD5) [ca md too weak]"),
            (.certificateFile(path: "x", reason: "system lib"), "cannot load the client certificate from 'x': system lib"),
        ]
        for (failure, text) in cases { XCTAssertEqual(failure.sentence(names), text) }
        XCTAssertEqual(TLSFailure.certificateFile(path: "w.pem", reason: "ee key too small").serverSentence(names, clientCA: "--client-ca"),
                       "cannot load the server certificate from 'w.pem': its key is too small for OpenSSL's security level "
                       + "(RSA needs 2048 bits or more) [ee key too small]")
        XCTAssertEqual(TLSFailure.trustStore(path: "k", reason: "no certificate or crl found").serverSentence(names, clientCA: "--client-ca"),
                       "cannot load the client CA certificates from 'k' (--client-ca): it holds no certificate "
                       + "in PEM form (-----BEGIN CERTIFICATE-----) [no certificate or crl found]")
    }
}

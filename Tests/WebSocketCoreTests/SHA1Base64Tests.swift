// SHA-1 (FIPS 180-4 vectors), Base64 (RFC 4648 §10) and the §1.3 Sec-WebSocket-Accept example.
import XCTest
@testable import WebSocketCore

final class SHA1Tests: XCTestCase {
    func hex(_ digest: [UInt8]) -> String {
        digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    func testEmptyMessage() {
        XCTAssertEqual(hex(SHA1.hash([UInt8]())), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }

    func testABC() {
        XCTAssertEqual(hex(SHA1.hash(utf8("abc"))), "a9993e364706816aba3e25717850c26c9cd0d89d")
    }

    func test448BitMessage() {
        XCTAssertEqual(hex(SHA1.hash(utf8("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
                       "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    func test896BitMessage() {
        let message = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
        XCTAssertEqual(hex(SHA1.hash(utf8(message))), "a49b2446a02c645bf419f995b67091253a04a259")
    }

    func testOneMillionA() {
        XCTAssertEqual(hex(SHA1.hash([UInt8](repeating: 0x61, count: 1_000_000))), "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
    }

    func testPaddingBoundaries() {
        // 55 bytes: padding fits the block; 56: needs a second block; 63, 64, 119, 120 around
        // the next ones (values from sha1sum).
        let expected: [(Int, String)] = [
            (55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"),
            (56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"),
            (63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"),
            (64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"),
            (119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"),
            (120, "f34c1488385346a55709ba056ddd08280dd4c6d6"),
        ]
        for (count, digest) in expected {
            XCTAssertEqual(hex(SHA1.hash([UInt8](repeating: 0x61, count: count))), digest, "\(count) × 'a'")
        }
    }

    func testUpdatingInPiecesEqualsHashingAtOnce() {
        let message = patternBytes(200)
        let whole = SHA1.hash(message)
        for split in [0, 1, 55, 56, 63, 64, 65, 127, 128, 199, 200] {
            var sha = SHA1()
            sha.update(message[0..<split])
            sha.update(message[split...])
            XCTAssertEqual(sha.finalize(), whole, "split at \(split)")
        }
    }

    func testDigestIsTwentyBytes() {
        XCTAssertEqual(SHA1.hash(utf8("x")).count, 20)
    }
}

final class Base64Tests: XCTestCase {
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    func testEncodesRFC4648Vectors() {
        for (plain, encoded) in Self.rfc4648 {
            XCTAssertEqual(Base64.encode(utf8(plain)), encoded, plain)
        }
    }

    func testDecodesRFC4648Vectors() {
        for (plain, encoded) in Self.rfc4648 {
            XCTAssertEqual(Base64.decode(encoded), utf8(plain), encoded)
        }
    }

    func testUsesPlusAndSlash() {
        XCTAssertEqual(Base64.encode([0xFB, 0xFF, 0xBF]), "+/+/")
        XCTAssertEqual(Base64.decode("+/+/"), [0xFB, 0xFF, 0xBF])
        XCTAssertEqual(Base64.encode([0xFF]), "/w==")
    }

    func testEveryByteValueRoundTrips() {
        let all = [UInt8](0...255)
        for length in 0...all.count where length % 37 == 0 || length < 8 || length == all.count {
            let bytes = Array(all[0..<length])
            XCTAssertEqual(Base64.decode(Base64.encode(bytes)), bytes, "length \(length)")
        }
    }

    func testSixteenByteKeyEncodesTo24Characters() {
        // The RFC 6455 §1.3 sample nonce.
        let nonce = utf8("the sample nonce")
        XCTAssertEqual(Base64.encode(nonce), "dGhlIHNhbXBsZSBub25jZQ==")
    }

    /// The table decoder against the first version's per-character rules (kept here as the
    /// reference), on every group of 4 from characters that hit each rule, alone and after
    /// a valid group.
    func testDecodeMatchesTheRulesOnEveryShortInput() {
        func reference(_ text: String) -> [UInt8]? {
            let input = Array(text.utf8)
            guard input.count % 4 == 0 else { return nil }
            var out: [UInt8] = []
            var i = 0
            while i < input.count {
                var n: UInt32 = 0
                var pad = 0
                for j in 0..<4 {
                    let c = input[i + j]
                    let v: UInt32
                    switch c {
                    case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
                    case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
                    case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
                    case UInt8(ascii: "+"): v = 62
                    case UInt8(ascii: "/"): v = 63
                    case UInt8(ascii: "="):
                        guard i + 4 == input.count, j >= 2 else { return nil }
                        pad += 1
                        v = 0
                    default: return nil
                    }
                    if pad > 0 && c != UInt8(ascii: "=") { return nil }
                    n = n << 6 | v
                }
                out.append(UInt8(n >> 16))
                if pad < 2 { out.append(UInt8(n >> 8 & 0xFF)) } else if n >> 8 & 0xFF != 0 { return nil }
                if pad < 1 { out.append(UInt8(n & 0xFF)) } else if n & 0xFF != 0 { return nil }
                i += 4
            }
            return out
        }
        let characters = ["A", "B", "Q", "g", "w", "z", "9", "+", "/", "=", "!", "\u{80}"]
        for a in characters { for b in characters { for c in characters { for d in characters {
            for text in [a + b + c + d, "Zm9v" + a + b + c + d] {
                XCTAssertEqual(Base64.decode(text), reference(text), text)
            }
        } } } }
    }

    func testDecodeRejectsBadInput() {
        let bad = [
            "Zg", "Zg=", "Zm9vY", // length not a multiple of 4
            "Zm9v!A==", "Zm 9v", "Zm9v\n", "Zm-v", "Zm_v", // characters outside the alphabet
            "====", "Z===", "=Zg=", "Zg=a", "Z=g=", // misplaced padding
            "Zg==Zg==", "Zm8=Zm9v", // padding before the end
            "Zh==", "Zm9=", // non-zero pad bits (not canonical)
            "Zm9vYmFyé===",
        ]
        for text in bad {
            XCTAssertNil(Base64.decode(text), text)
        }
    }
}

final class AcceptValueTests: XCTestCase {
    func testRFC6455Section1_3Example() {
        XCTAssertEqual(ClientHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    func testGUID() {
        XCTAssertEqual(ClientHandshake.guid, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
    }

    func testAcceptIsBase64OfSHA1OfKeyAndGUID() {
        let key = "x3JJHMbDL1EzLkh9GBhXDw=="
        XCTAssertEqual(ClientHandshake.acceptValue(forKey: key), Base64.encode(SHA1.hash(utf8(key + ClientHandshake.guid))))
        XCTAssertEqual(ClientHandshake.acceptValue(forKey: key), "HSmrc0sMlYUkAGmm5OPpG2HaGWk=")
    }
}

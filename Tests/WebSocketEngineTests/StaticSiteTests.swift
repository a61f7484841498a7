// StaticSite's pure parts: the 301's Location and which refusals are 403 (the rest is
// StaticFilesTests, against the binary).
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

final class StaticSiteTests: XCTestCase {
    func testTheRedirectOfAnAbsoluteFormTargetIsItsPathWithASlash() {
        XCTAssertEqual(StaticSite.slashLocation("/sub?q=1"), "/sub/?q=1")
        XCTAssertEqual(StaticSite.slashLocation("http://127.0.0.1:8080/sub?q=1"), "/sub/?q=1")
        XCTAssertEqual(StaticSite.slashLocation("http://evil.example//sub"), "/sub/", "no redirect to another host")
    }

    /// 403 only where the file system said EACCES (nginx's answer); whatever the path rules
    /// or the resolver refuse before asking stays 404.
    func testOnlyPermissionDeniedIs403() {
        XCTAssertEqual(StaticNotFound.file(.denied).status, 403)
        XCTAssertEqual(StaticNotFound.noIndex(.denied).status, 403)
        let notFound: [StaticNotFound] = [.path(.dotfile(".env")), .path(.dotSegment), .file(.symlink), .file(.notFound),
                                          .file(.notRegular), .file(.outsideRoot), .noIndex(nil), .noIndex(.notFound),
                                          .fileWithSlash, .noConsole]
        for why in notFound { XCTAssertEqual(why.status, 404, "\(why)") }
    }
}

import XCTest
import WebSocketTransport
@testable import WSPipeBridge

/// The console's edit rows after a resize (`EditRows`) and its --reconnect status row
/// (`ReconnectStatus`).
final class ConsoleStatusTests: XCTestCase {
    /// A prompt and 150 columns typed at 60: rows of 60, 60 and 32 cells, the cursor at the
    /// end. Narrowed to 40, a terminal that reflows makes them 2 + 2 + 1 rows: the first
    /// row is 4 rows above the cursor, not 2 (two stale rows stayed in tmux).
    func testNarrowingCountsTheRowsAReflowingTerminalWraps() {
        let rows = EditRows(cells: [60, 60, 32], cursorRow: 2, cursorColumn: 32, columns: 60)
        XCTAssertEqual(rows.rowsAboveCursor(reflowedTo: 40), 4)
        XCTAssertEqual(rows.rowsAboveCursor(reflowedTo: 60), 2, "the same width")
        XCTAssertEqual(rows.rowsAboveCursor(reflowedTo: 100), 2, "wider: rows ended in CR LF are not joined")
        XCTAssertEqual(rows.rowsAboveCursor(reflowedTo: 20), 3 + 3 + 1, "the cursor's own row wraps too")
        let empty = EditRows(cells: [0, 2], cursorRow: 1, cursorColumn: 2, columns: 80)
        XCTAssertEqual(empty.rowsAboveCursor(reflowedTo: 10), 1, "an empty row still takes a row")
        let status = EditRows(cells: [76, 2], cursorRow: 1, cursorColumn: 2, columns: 80)
        XCTAssertEqual(status.rowsAboveCursor(reflowedTo: 40), 2, "a status row above the prompt wraps too")
    }

    func testTheStatusRowCountsDownThenGoes() {
        let start = Instant.now()
        var status = ReconnectStatus()
        XCTAssertNil(status.line(at: start), "connected: no row")
        status.disconnected(at: start)
        XCTAssertNil(status.line(at: start), "a connection that ended with no retry after it")
        status.retry(after: 2.5, attempt: 2, now: start)
        XCTAssertEqual(status.line(at: start), "reconnecting in 3 s (attempt 2); lines entered now are sent once connected")
        XCTAssertEqual(status.line(at: start.adding(seconds: 1)), "reconnecting in 2 s (attempt 2); lines entered now are sent once connected")
        XCTAssertEqual(status.line(at: start.adding(seconds: 2.2)), "reconnecting in 0.3 s (attempt 2); lines entered now are sent once connected")
        let next = status.nextChange(after: start)
        XCTAssertEqual(next.map { $0.seconds(since: start) } ?? -1, 0.5, accuracy: 1e-6, "when 3 becomes 2")
        XCTAssertNil(status.nextChange(after: start.adding(seconds: 1.6)), "under a second: no more ticks")
        status.lineQueued()
        status.lineQueued()
        status.dialing(attempt: 2)
        XCTAssertEqual(status.line(at: start), "reconnecting now (attempt 2); 2 lines queued, sent once connected")
        XCTAssertNil(status.nextChange(after: start))
        XCTAssertEqual(status.connected(attempt: 2, now: start.adding(seconds: 3.04)),
                       " again after 3 s (attempt 2; sending the 2 lines entered meanwhile)")
        XCTAssertNil(status.line(at: start))
        XCTAssertEqual(status.queued, 0)
    }

    func testTheFirstConnectionHasNoStatusNorAgain() {
        let start = Instant.now()
        var status = ReconnectStatus()
        status.dialing(attempt: 1)
        XCTAssertNil(status.line(at: start), "the first attempt: no row")
        XCTAssertEqual(status.connected(attempt: 1, now: start), "")
        status.retry(after: 1, attempt: 2, now: start)  // the first attempt failed
        XCTAssertEqual(status.connected(attempt: 3, now: start), " (attempt 3)")
    }
}

import WebSocketEngine

/// The default server mode (-l without --echo/--broadcast/--exec): the stdio bridge with
/// one client at a time, as `websocat -s`. The session is every client's delegate in turn;
/// the server accepts the next client only when the current one has gone.
final class StdioMode: ServerMode {
    private unowned let session: Session

    init(session: Session) { self.session = session }

    func handler(for connection: ServerConnection) -> ConnectionDelegate {
        session.clientArrives()
        return session
    }

    func connectionWillStart(_ connection: ServerConnection, driver: ConnectionDriver) { session.clientBegins(driver) }

    func connectionDidStart(_ connection: ServerConnection) { session.clientStarted() }
}

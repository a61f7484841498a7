// The lower modules' types that WSKit's public API names, so that `import WSKit` alone lets
// a user write them (`let family: AddressFamily = .ipv4`, `ListenAddress.unix(path:)`).
// Exactly these: a type here that no public signature mentions would widen the API.
@_exported import struct WebSocketCore.WebSocketURL
@_exported import enum WebSocketTransport.AddressFamily
@_exported import enum WebSocketTransport.ListenAddress
@_exported import enum WebSocketTransport.TLSVersion

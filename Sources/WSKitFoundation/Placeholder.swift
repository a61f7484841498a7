import WSKit

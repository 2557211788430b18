// A dynalite server on 127.0.0.1 and a free port, for tests/support/dynalite.py: prints the
// port on its first line, and exits when its standard input closes (the test run ended).
const dynalite = require('dynalite')

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`)
})
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()

#!/usr/bin/env node
// Compiles the binding (fuse-native.c, against the libfuse 2.9 headers fuse-shared-library-linux
// ships; the result links the system's libfuse.so.2) with node-gyp, and where libfuse 3's headers
// are (pkg-config fuse3: Debian's libfuse3-dev) the same source against libfuse 3 (links
// libfuse3.so.3), written to prebuilds/<platform>-<arch>/libfuse3/fuse.node (index.js prefers it).
//
//   node scripts/compile.js --prebuild        this repository's build: compiles, strips, and puts the
//                                             result at prebuilds/<platform>-<arch>/node.napi.node
//                                             (what the package ships), leaving no build/ behind
//   node scripts/compile.js --if-no-prebuild  the package's install step: nothing when a prebuilt
//                                             binary for this machine loads (linux-x64 ships one, so
//                                             no compiler is needed there), else build/Release/fuse.node
//
// node-gyp is the one npm or pnpm runs this script with (npm_config_node_gyp), else the one npm
// bundles, else `node-gyp` on PATH. The running Node's own headers are used when its installation
// has them (official tarballs and distribution packages do), so nothing is downloaded.
'use strict'
const { spawnSync } = require('child_process')
const fs = require('fs')
const path = require('path')

const root = path.join(__dirname, '..')
const tuple = `${process.platform}-${process.arch}`
const prebuild = path.join(root, 'prebuilds', tuple, 'node.napi.node')
const prebuild3 = path.join(root, 'prebuilds', tuple, 'libfuse3', 'fuse.node')
const mode = process.argv[2]

function prebuildLoads () {
  if (!fs.existsSync(prebuild)) return false
  const probe = spawnSync(process.execPath, ['-e', 'process.exitCode = require(process.argv[1]).utime_omit_ok === 1 ? 0 : 1', prebuild], { stdio: 'ignore' })
  return probe.status === 0
}

function nodeGyp () {
  const candidates = [process.env.npm_config_node_gyp]
  const npmDir = path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm')
  for (const from of [npmDir, process.env.npm_execpath && path.dirname(process.env.npm_execpath)].filter(Boolean)) {
    try {
      candidates.push(require.resolve('node-gyp/bin/node-gyp.js', { paths: [from] }))
    } catch {}
  }
  const found = candidates.find(file => file && fs.existsSync(file))
  return found ? [process.execPath, found] : ['node-gyp']
}

function compile () {
  const args = ['rebuild', '--loglevel=warn']
  const prefix = path.resolve(process.execPath, '..', '..')
  if (!process.env.npm_config_nodedir && ['node_api.h', 'common.gypi'].every(f => fs.existsSync(path.join(prefix, 'include', 'node', f)))) {
    args.push('--nodedir=' + prefix)
  }
  const [command, ...first] = nodeGyp()
  const run = spawnSync(command, [...first, ...args], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] })
  if (run.error) throw run.error
  if (run.status !== 0) process.exit(run.status === null ? 1 : run.status)
  return path.join(root, 'build', 'Release', 'fuse.node')
}

if (mode === '--if-no-prebuild') {
  if (!prebuildLoads()) compile()
} else if (mode === '--prebuild') {
  const built = compile()
  const built3 = path.join(path.dirname(built), 'fuse3.node')
  fs.rmSync(path.dirname(prebuild3), { recursive: true, force: true })
  for (const [from, to] of [[built, prebuild], [built3, prebuild3]]) {
    if (!fs.existsSync(from)) continue
    fs.mkdirSync(path.dirname(to), { recursive: true })
    fs.copyFileSync(from, to)
    // The debugging symbols of `-g` are left out of what ships (prebuildify --strip does the same).
    const strip = spawnSync('strip', ['--strip-debug', to], { stdio: 'inherit' })
    if (strip.error && strip.error.code !== 'ENOENT') throw strip.error
  }
  fs.rmSync(path.join(root, 'build'), { recursive: true, force: true })
  if (!prebuildLoads()) {
    console.error(`${prebuild} does not load as this package's binding`)
    process.exit(1)
  }
  for (const file of [prebuild, prebuild3].filter(f => fs.existsSync(f))) console.log(`wrote ${path.relative(root, file)} (${Math.round(fs.statSync(file).size / 1024)} KB)`)
} else {
  console.error('usage: node scripts/compile.js --prebuild | --if-no-prebuild')
  process.exit(2)
}

{
  "variables": {
    # The libfuse 3 binding is built where its headers are (Debian's libfuse3-dev).
    "has_fuse3": "<!(pkg-config --exists fuse3 && echo 1 || echo 0)",
  },
  "targets": [{
    "target_name": "fuse",
    "include_dirs": [
      "<!(node -e \"require('napi-macros')\")",
      "<!(node -e \"require('fuse-shared-library/include')\")",
    ],
    "libraries": [
      "<!(node -e \"require('fuse-shared-library/lib')\")",
    ],
    "sources": [
      "fuse-native.c"
    ],
    'xcode_settings': {
      'OTHER_CFLAGS': [
        '-g',
        '-O3',
        '-Wall'
      ]
    },
    'cflags': [
      '-g',
      '-O3',
      '-Wall'
    ],
  }, {
    "target_name": "postinstall",
    "type": "none",
    "dependencies": ["fuse"],
    "copies": [{
      "destination": "build/Release",
      "files": [ "<!(node -e \"require('fuse-shared-library/lib')\")" ],
    }]
  }],
  "conditions": [
    ["has_fuse3==1", {
      "targets": [{
        "target_name": "fuse3",
        "defines": ["FUSE_NATIVE_LIBFUSE3"],
        "include_dirs": [
          "<!(node -e \"require('napi-macros')\")",
          "<!@(pkg-config --variable=includedir fuse3)/fuse3",
        ],
        "libraries": [
          "<!@(pkg-config --libs fuse3)",
        ],
        "sources": [
          "fuse-native.c"
        ],
        'cflags': [
          '-g',
          '-O3',
          '-Wall'
        ],
      }],
    }],
  ],
}

const { spawn } = require('child_process');
spawn('ls', [dir]);

const { execSync } = require('child_process');
execSync(`git log ${process.argv[2]}`);

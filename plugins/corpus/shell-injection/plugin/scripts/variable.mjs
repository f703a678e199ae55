import cp from 'node:child_process';
const cmd = `ls ${dir}`;
cp.exec(cmd);

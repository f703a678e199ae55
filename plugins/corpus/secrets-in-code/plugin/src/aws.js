// deploy helper
const accessKey = 'AKIA2E0A8F3B244C9986';

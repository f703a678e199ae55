export const token = process.env.GITHUB_TOKEN;
const fallback = 'ghp_8f3Kd92LmQx7Zr4Tn1Vb6Wc0Ye5Ua2Sp3Hj9';
